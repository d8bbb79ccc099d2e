/*
 * The janitor program of jail (see package programs and cgroups/janitor):
 * the process that removes one sandbox's cgroup directories once its
 * supervisor is gone, whichever way it went, SIGKILL included.
 *
 *   jail:cgroup-janitor DIR...
 *
 * It waits until its stdin (a pipe whose other end only the supervisor
 * holds) reaches end of file, then, for each DIR that is a sandbox cgroup
 * (a child of a directory named "jail" inside /sys/fs/cgroup, given as a
 * clean path), kills whatever is still listed in it and removes it.
 *
 * Then it sweeps, as the Go janitor does (Sweep), in each parent of the
 * DIRs it was given that was not swept in the last minute: it removes the
 * sandbox cgroups that no supervisor holds (a shared flock on the
 * directory) and that are older than a minute. They are left by a
 * supervisor killed between making its cgroup and starting its janitor.
 * Sweeping only removes empty directories.
 *
 * It is C, not Go, because one starts beside every sandbox: a Go program's
 * runtime start and exit cost two milliseconds of CPU, at the moment the
 * sandbox's own init starts. It does what the Go janitor's one-sandbox mode
 * does (cgroups/janitor, which stays for builds without this program), with
 * the same rules for which directories it may touch.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char mountpoint[] = "/sys/fs/cgroup/";
static const char parent[] = "jail";

/* ours: dir is clean (no empty, "." or ".." component, no trailing slash),
 * below the cgroup mount, its parent is named "jail" and its own name has
 * no dot. */
static int ours(const char *dir)
{
	size_t n = strlen(dir);
	if (strncmp(dir, mountpoint, sizeof(mountpoint) - 1) != 0 || dir[n - 1] == '/')
		return 0;
	const char *c = dir + 1;
	while (*c) {
		const char *end = strchrnul(c, '/');
		size_t len = (size_t)(end - c);
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c = *end ? end + 1 : end;
	}
	const char *base = strrchr(dir, '/') + 1;
	if (strchr(base, '.') != NULL)
		return 0;
	/* The component before base must be exactly "jail". */
	const char *up = base - 1; /* the slash before base */
	if (up - dir < (long)sizeof(parent))
		return 0;
	return strncmp(up - (sizeof(parent) - 1), parent, sizeof(parent) - 1) == 0 &&
	       up[-(long)sizeof(parent)] == '/';
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* kill_procs SIGKILLs every process listed in dir's cgroup.procs, never this
 * one. */
static void kill_procs(const char *dir)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return;
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1) {
		if (pid > 0 && pid != (long)getpid())
			kill((pid_t)pid, SIGKILL);
	}
	fclose(f);
}

/* remove_dir removes dir, killing what is left in it and retrying for up to
 * five seconds while the kernel still counts exiting processes. */
static int remove_dir(const char *dir)
{
	double deadline = now() + 5;
	for (;;) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || now() > deadline) {
			fprintf(stderr, "jail: cgroup janitor: remove cgroup %s: %s\n", dir, strerror(errno));
			return -1;
		}
		kill_procs(dir);
		if (rmdir(dir) == 0)
			return 0;
		struct timespec pause = {0, 5 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
}

/* sweep_age is cgroups/janitor.SweepAge, in seconds. */
static const time_t sweep_age = 60;

/* sweep_due: parent was last swept sweep_age or more ago, by the mark a
 * sweep leaves (the directory's access time, which cgroupfs never moves by
 * itself); if so, it marks it swept now. Two janitors may both find it due:
 * both sweeping is harmless. */
static int sweep_due(const char *parent)
{
	struct stat st;
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	if (lstat(parent, &st) != 0 || wall.tv_sec - st.st_atim.tv_sec < sweep_age)
		return 0;
	struct timespec stamp[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	return utimensat(AT_FDCWD, parent, stamp, AT_SYMLINK_NOFOLLOW) == 0;
}

/* sweep removes the children of parent that are sandbox cgroups, older than
 * sweep_age and held by no supervisor. A cgroupfs directory's time is never
 * earlier than its making. */
static void sweep(const char *parent)
{
	DIR *d = opendir(parent);
	if (d == NULL)
		return;
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char dir[4096];
		if (e->d_type != DT_DIR ||
		    snprintf(dir, sizeof(dir), "%s/%s", parent, e->d_name) >= (int)sizeof(dir) || !ours(dir))
			continue;
		struct stat st;
		if (lstat(dir, &st) != 0 || wall.tv_sec - st.st_mtim.tv_sec < sweep_age)
			continue;
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			rmdir(dir);
		close(fd);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	prctl(PR_SET_NAME, "jail-janitor", 0, 0, 0);
	if (argc < 1 || strcmp(argv[0], "jail:cgroup-janitor") != 0) {
		fputs("jail: this program is started by jail only\n", stderr);
		return 125;
	}
	char buf[512];
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	int failed = 0;
	for (int i = 1; i < argc; i++) {
		if (ours(argv[i]) && remove_dir(argv[i]) != 0)
			failed = 1;
	}
	/* Each distinct parent once; sandbox cgroup paths are short, a
	 * handful of hierarchies at most. */
	for (int i = 1; i < argc; i++) {
		if (!ours(argv[i]))
			continue;
		size_t len = (size_t)(strrchr(argv[i], '/') - argv[i]);
		int dup = 0;
		for (int j = 1; j < i && !dup; j++)
			dup = ours(argv[j]) && (size_t)(strrchr(argv[j], '/') - argv[j]) == len &&
			      strncmp(argv[i], argv[j], len) == 0;
		if (dup)
			continue;
		char parent[4096];
		if (len < sizeof(parent)) {
			memcpy(parent, argv[i], len);
			parent[len] = '\0';
			if (sweep_due(parent))
				sweep(parent);
		}
	}
	return failed;
}
