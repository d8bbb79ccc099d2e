/*
 * The cgroup janitor of one sandbox (see package programs and
 * cgroups/janitor): the process that removes one sandbox's cgroup
 * directories once its supervisor is gone, whichever way it went, SIGKILL
 * included. It is the other half of jail's helper program: init.c's main
 * calls janitor_main when started as
 *
 *   jail:cgroup-janitor DIR...
 *
 * The supervisor starts it, in a session of its own, before it makes any
 * of the DIRs, and makes them only once it runs: a supervisor killed at any
 * moment (alone, or with its process group or session) leaves nothing that
 * a janitor does not remove. It waits until its stdin (a pipe whose other
 * end only the supervisor holds) reaches end of file, then, for each DIR
 * that is a sandbox cgroup (a child of a directory named "jail" inside
 * /sys/fs/cgroup, given as a clean path) and exists, kills whatever is
 * still in it (kill_procs: never a process outside it) and removes it.
 *
 * Then it sweeps, as the Go janitor does (Sweep), in each parent of the
 * DIRs it was given that was not swept in the last minute: it removes the
 * sandbox cgroups that no supervisor holds (a shared flock on the
 * directory) and that are older than a minute, which a supervisor whose
 * janitor could not start, or was killed itself, leaves. Sweeping only
 * removes empty directories.
 *
 * It is C, not Go, because one starts beside every sandbox: a Go program's
 * runtime start and exit cost two milliseconds of CPU, at the moment the
 * sandbox's own init starts. It does what the Go janitor's one-sandbox mode
 * does (cgroups/janitor, whose watching mode serves a Pool), with the same
 * rules for which directories it may touch and which processes it
 * may signal.
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
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

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

/* membership tells whether a process is in one cgroup, by the line of
 * /proc/PID/cgroup of the cgroup's hierarchy: "0::PATH" on v2, on v1
 * "ID:CONTROLLERS:PATH" where CONTROLLERS names the hierarchy. */
struct membership {
	/* the v1 hierarchy's name under the mount point ("memory", "cpu",
	 * "cpu,cpuacct"), "" on v2 */
	char hierarchy[256];
	/* the cgroup's path within its hierarchy, as /proc/PID/cgroup shows
	 * it: a suffix of the directory's path */
	const char *path;
};

/* member_test fills m for dir, a sandbox cgroup (ours); 0 on success. */
static int member_test(const char *dir, struct membership *m)
{
	struct statfs st;
	if (statfs(dir, &st) != 0)
		return -1;
	const char *rel = dir + sizeof(mountpoint) - 2; /* from the slash after the mount point */
	if (st.f_type == CGROUP2_SUPER_MAGIC) {
		m->hierarchy[0] = '\0';
		m->path = rel;
		return 0;
	}
	const char *slash = strchr(rel + 1, '/');
	size_t len = slash == NULL ? 0 : (size_t)(slash - (rel + 1));
	if (len == 0 || len >= sizeof(m->hierarchy))
		return -1;
	memcpy(m->hierarchy, rel + 1, len);
	m->hierarchy[len] = '\0';
	m->path = slash;
	return 0;
}

/* line_matches: line ("ID:CONTROLLERS:PATH", without its newline) is m's
 * cgroup. */
static int line_matches(char *line, const struct membership *m)
{
	char *c1 = strchr(line, ':');
	char *c2 = c1 == NULL ? NULL : strchr(c1 + 1, ':');
	if (c2 == NULL || strcmp(c2 + 1, m->path) != 0)
		return 0;
	*c2 = '\0';
	const char *controllers = c1 + 1;
	if (m->hierarchy[0] == '\0')
		return c1 - line == 1 && line[0] == '0' && controllers[0] == '\0';
	if (strcmp(controllers, m->hierarchy) == 0)
		return 1;
	size_t hl = strlen(m->hierarchy);
	for (const char *c = controllers; *c;) {
		const char *end = strchrnul(c, ',');
		size_t len = (size_t)(end - c);
		if ((len == hl && strncmp(c, m->hierarchy, hl) == 0) ||
		    (len == hl + 5 && strncmp(c, "name=", 5) == 0 && strncmp(c + 5, m->hierarchy, hl) == 0))
			return 1;
		c = *end ? end + 1 : end;
	}
	return 0;
}

/* holds: the process pid (its thread group leader) is in m's cgroup. A
 * line longer than the buffer is not ours (the path would be longer than
 * any directory the janitor is given). */
static int holds(long pid, const struct membership *m)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	char line[4200];
	int found = 0, whole = 1;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		size_t n = strlen(line);
		int ends = n > 0 && line[n - 1] == '\n';
		if (ends)
			line[n - 1] = '\0';
		found = whole && (ends || feof(f)) && line_matches(line, m);
		whole = ends;
	}
	fclose(f);
	return found;
}

/* kill_procs SIGKILLs every process in dir's cgroup, and never one outside
 * it, nor this one. Where the kernel has cgroup.kill (v2, Linux 5.14+) the
 * kernel kills by its own list, forking processes included. Elsewhere it
 * goes by cgroup.procs: each pid is pinned by a pidfd first, then its
 * process's cgroup read from /proc/PID/cgroup (its thread group leader's:
 * a process of jail's own with only a thread passing through, a v1
 * supervisor or forker forking an init, is not the sandbox's), then the
 * signal goes through the pidfd. The read describes the pidfd's process
 * whenever the signal reaches it, since a live process has held its pid all
 * along; a process that took a recycled pid is never signalled. Without
 * pidfds (before Linux 5.3) nothing is signalled: the sandbox's processes
 * end with its init, whose pid namespace takes them. */
static void kill_procs(const char *dir)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/cgroup.kill", dir) >= (int)sizeof(path))
		return;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = write(fd, "1", 1);
		close(fd);
		if (n == 1)
			return;
	}
	struct membership m;
	if (member_test(dir, &m) != 0)
		return;
	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return;
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1) {
		if (pid <= 0 || pid == (long)getpid())
			continue;
		int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (pidfd < 0)
			continue;
		if (holds(pid, &m))
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		close(pidfd);
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

int janitor_main(int argc, char **argv);

int janitor_main(int argc, char **argv)
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
