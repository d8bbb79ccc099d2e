/* The exec fast path of docs/persistent.md, for measurement only: a process in
 * new user/mount/pid/net/ipc/uts namespaces (the "init") serves requests on a
 * unix socketpair: each carries stdin/stdout/stderr by SCM_RIGHTS; the init
 * forks, the child dup2s them and execs /bin/true; the init answers with the
 * exit status. The client times request to answer.
 * Build: gcc -O2 -o execbench docs/persistent-execbench.c; run: ./execbench 300
 * (vfork variant: replace fork() by vfork() in the init's loop). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int send_fds(int s, const int *fds, int n, int val)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = {&val, sizeof(val)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		mh.msg_control = cbuf, mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	return sendmsg(s, &mh, 0) == sizeof(val) ? 0 : -1;
}

static int recv_fds(int s, int *fds, int *val)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = {val, sizeof(*val)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) != sizeof(*val))
		return -1;
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_type == SCM_RIGHTS) {
			n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
		}
	return n;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return 1;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
		perror("unshare");
		return 1;
	}
	pid_t init = fork();
	if (init == 0) { /* pid 1 of the new pid namespace */
		close(sv[0]);
		for (;;) {
			int fds[3], val;
			if (recv_fds(sv[1], fds, &val) != 3)
				_exit(0);
			pid_t c = fork();
			if (c == 0) {
				for (int i = 0; i < 3; i++)
					dup2(fds[i], i);
				char *av[] = {"/bin/true", NULL};
				execv(av[0], av);
				_exit(127);
			}
			for (int i = 0; i < 3; i++)
				close(fds[i]);
			int st;
			waitpid(c, &st, 0);
			val = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			send_fds(sv[1], NULL, 0, val);
		}
	}
	close(sv[1]);
	double *t = calloc(n, sizeof(double));
	int stdio[3] = {0, 1, 2};
	for (int i = 0; i < n; i++) {
		double s = now_ms();
		int val = 0, fds[3];
		send_fds(sv[0], stdio, 3, 0);
		if (recv_fds(sv[0], fds, &val) < 0 || val != 0)
			return 1;
		t[i] = now_ms() - s;
	}
	qsort(t, n, sizeof(double), cmp);
	printf("exec through a running init: median %.3f ms (min %.3f, n=%d)\n", t[n / 2], t[0], n);
	close(sv[0]);
	waitpid(init, NULL, 0);
	return 0;
}
