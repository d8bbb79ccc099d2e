/*
 * cgwrap runs a command in a fresh cgroup v1 sandbox cgroup with jail's
 * default limits, the way a careful wrapper would put bubblewrap under
 * limits: startbench's "bwrap+cgroup" contender, to show how much of the
 * difference between jail and bwrap is the cgroup.
 *
 *   cgwrap PARENT COMMAND [ARG...]
 *
 * It makes PARENT/cgwrap-<pid> in the memory, cpu, cpuacct and pids
 * hierarchies, writes 512M (swap included), 1 CPU and 256 tasks, moves
 * itself in (a single-threaded process writing 0 to tasks takes no lock),
 * forks the command there, moves itself back out to PARENT, waits, and
 * exits with the command's status once the cgroup is removed (or, while
 * the command's last processes still exit, once a child of its own is left
 * to remove it, as jail's janitor does). v1 only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *controllers[] = {"memory", "cpu", "cpuacct", "pids"};
#define NCONTROLLERS 4

static int put(const char *dir, const char *file, const char *value)
{
	char path[1024];
	snprintf(path, sizeof(path), "%.512s/%.64s", dir, file);
	FILE *f = fopen(path, "we");
	if (f == NULL)
		return -1;
	int ok = fputs(value, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || strlen(argv[1]) > 64) {
		fputs("usage: cgwrap PARENT COMMAND [ARG...]\n", stderr);
		return 125;
	}
	char dirs[NCONTROLLERS][512], parents[NCONTROLLERS][256];
	for (int i = 0; i < NCONTROLLERS; i++) {
		snprintf(parents[i], sizeof(parents[i]), "/sys/fs/cgroup/%s/%.64s", controllers[i], argv[1]);
		snprintf(dirs[i], sizeof(dirs[i]), "%.256s/cgwrap-%d", parents[i], (int)getpid());
		mkdir(parents[i], 0755);
		if (mkdir(dirs[i], 0755) != 0) {
			perror(dirs[i]);
			return 125;
		}
	}
	if (put(dirs[0], "memory.limit_in_bytes", "536870912") ||
	    put(dirs[1], "cpu.cfs_period_us", "100000") || put(dirs[1], "cpu.cfs_quota_us", "100000") ||
	    put(dirs[3], "pids.max", "256")) {
		perror("cgwrap: limits");
		return 125;
	}
	/* Swap is limited too where the kernel accounts it, as jail does. */
	if (put(dirs[0], "memory.memsw.limit_in_bytes", "536870912") && errno != ENOENT) {
		perror("cgwrap: swap limit");
		return 125;
	}
	for (int i = 0; i < NCONTROLLERS; i++)
		if (put(dirs[i], "tasks", "0")) {
			perror("cgwrap: enter");
			return 125;
		}
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	for (int i = 0; i < NCONTROLLERS; i++)
		put(parents[i], "tasks", "0");
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		status = 125 << 8;
	/* What the command left may still be exiting: as jail does, answer
	 * now and leave the removal to a child of our own. */
	int busy = 0;
	for (int i = 0; i < NCONTROLLERS; i++)
		if (rmdir(dirs[i]) != 0)
			busy = 1;
	if (busy && fork() == 0) {
		setsid();
		for (int try = 0; try < 2000; try++) {
			busy = 0;
			for (int i = 0; i < NCONTROLLERS; i++)
				if (rmdir(dirs[i]) != 0 && errno != ENOENT)
					busy = 1;
			if (!busy)
				break;
			usleep(1000);
		}
		_exit(0);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
