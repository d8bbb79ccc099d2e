/*
 * The monitor of one persistent sandbox (docs/persistent.md): the host
 * process that holds the sandbox while no jail process runs. It is the
 * third role of jail's helper program: init.c's main calls monitor_main
 * when started as
 *
 *   jail:monitor NAME SOCK PIDFD LISTENER LOCK DIR PARENT JANITOR
 *
 * by the sandbox's holder (jail's own program, re-executed), which booted
 * the sandbox and then executed this program in its place, so that the
 * sandbox's init is this process's child. It inherits these descriptors,
 * whose numbers its arguments give (the holder is a Go program, whose
 * runtime holds descriptors of its own until the exec, so it cannot move
 * them to fixed numbers):
 *
 *   SOCK      the control socket to the init (the init's first connection)
 *   PIDFD     a pidfd of the init
 *   LISTENER  the sandbox's listening socket (ctl.sock in its state
 *             directory)
 *   LOCK      the sandbox's lock file, on which the holder took LOCK_EX:
 *             held for this process's whole life, it tells a live sandbox
 *             from a dead one
 *   DIR       the sandbox's state directory; PARENT the directory holding
 *             it (as NAME)
 *   JANITOR   the write end of the cgroup janitor's pipe, held so that the
 *             janitor removes the sandbox's cgroup once this process is
 *             gone, whichever way it goes (/dev/null without a cgroup)
 *
 * For each client that connects whose peer uid (SO_PEERCRED) is this
 * process's own, it makes a socket pair, sends one end to the init as an
 * attach message and the other to the client: the client then talks to
 * the init directly, through a connection of its own, which the init
 * serves beside the others (init.c's serve). The monitor reads nothing a
 * client sends, and nothing but its own attach messages reach the init's
 * first connection; so a client can do no more than any client, and the
 * monitor relays no output (an exec costs it nothing).
 *
 * When the init ends, the monitor reaps it and ends too: with status 0
 * (asked to end: an end message, its TTL, its idle timeout) it first
 * removes the state directory, which is then a removed sandbox; with any
 * other end (killed, the sandbox's memory limit) it removes only ctl.sock
 * and leaves the rest for `jail ls` to show as dead and `jail rm` to
 * remove. Its death by any means ends the sandbox: the init's first
 * connection hangs up, and the init kills everything and ends.
 *
 * It is C for memory: an idle Go process is 2.5 MiB of RSS, more than a
 * sandbox's whole budget; this is about 0.15 MiB.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The protocol's generated C end: this file uses its encoder only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../init/wire.h"
#pragma GCC diagnostic pop

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The inherited descriptors, in the order of the arguments. */
enum { INIT_SOCK, INIT_PIDFD, LISTENER, LOCK, STATE_DIR, STATE_PARENT, JANITOR, NFDS };
static int fds[NFDS];

/* send_one sends a message of kind, with fd attached (unless -1), on sock;
 * an error has step and reason. */
static int send_one(int sock, const char *kind, int fd, int flags, const char *step, const char *reason)
{
	struct wire_writer w = {0};
	for (int i = 0; i < 4; i++)
		wire_put_byte(&w, 0); /* the length, filled in below */
	struct wire_message body = {.kind = (char *)kind, .step = (char *)step, .reason = (char *)reason};
	wire_encode(&w, &body);
	uint32_t size = (uint32_t)(w.len - 4);
	for (int i = 0; i < 4; i++)
		w.buf[i] = (unsigned char)(size >> (8 * i));
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	memset(&control, 0, sizeof(control));
	struct iovec iov = {w.buf, w.len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	/* The rest, should the first send have taken only part (never, for a
	 * message this small on a socket with room). */
	/* Once part of it is sent, the rest must follow whatever the wait:
	 * a message cut short would break the stream. */
	size_t done = n < 0 ? 0 : (size_t)n;
	while (n >= 0 && done < w.len) {
		n = send(sock, w.buf + done, w.len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n > 0)
			done += (size_t)n;
	}
	int saved = errno;
	free(w.buf);
	errno = saved;
	return n < 0 ? -1 : 0;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* pidfd_pid is the pid a pidfd names now, from its fdinfo: -1 once that
 * process has ended, 0 when it cannot be told. */
static long pidfd_pid(int pidfd)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	char line[256];
	long pid = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "Pid:", 4) == 0) {
			pid = strtol(line + 4, NULL, 10);
			break;
		}
	}
	fclose(f);
	return pid;
}

/*
 * trusted_peer: the client runs as this process's user and in its user
 * namespace. The uid alone would not do: a rootless sandbox's root is the
 * user's own uid as the host sees it (SO_PEERCRED translates), and a
 * sandbox that could reach the socket (a state directory placed where a
 * sandbox sees it) would pass. A process in a sandbox is always in a
 * user namespace below this one. The namespace is read through /proc/PID
 * of the peer's pid; where the kernel gives the peer's pidfd
 * (SO_PEERPIDFD, Linux 6.5), the pid is checked to still be that process
 * after the read, so that a pid reused meanwhile cannot stand in for it.
 */
static bool trusted_peer(int client)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(client, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred) || cred.uid != geteuid() ||
	    cred.pid <= 0)
		return false;
	struct stat own, peer;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)cred.pid);
	if (stat("/proc/self/ns/user", &own) != 0 || stat(path, &peer) != 0 || own.st_dev != peer.st_dev ||
	    own.st_ino != peer.st_ino)
		return false;
	int pidfd = -1;
	len = sizeof(pidfd);
	if (getsockopt(client, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0 || pidfd < 0)
		return errno == ENOPROTOOPT; /* an older kernel: the pid is all there is */
	long now = pidfd_pid(pidfd);
	close(pidfd);
	return now == cred.pid;
}

/* serve_client attaches one connected client, or tells it why not. */
static void serve_client(int client)
{
	if (!trusted_peer(client)) {
		close(client);
		return;
	}
	int pair[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
		close(client);
		return;
	}
	/* Never waiting on the init: one that does not read (stalled, or
	 * buried in work) costs the client its connection, not the monitor
	 * its other clients and its watch over the init. A failed attach
	 * is never taken for the init's end, which only its pidfd tells:
	 * the kernel refuses a descriptor in flight for reasons a sandbox
	 * may cause (ETOOMANYREFS: its user's descriptors in flight, which a
	 * rootless sandbox's processes count in too). */
	if (send_one(fds[INIT_SOCK], "attach", pair[0], MSG_DONTWAIT, NULL, NULL) == 0) {
		(void)send_one(client, "attached", pair[1], MSG_DONTWAIT, NULL, NULL);
	} else {
		/* musl has no text for ETOOMANYREFS. */
		int err = errno;
		char reason[160];
		snprintf(reason, sizeof(reason), "the monitor cannot hand the sandbox a connection: %s",
			 err == ETOOMANYREFS ? "too many descriptors in flight for its user (ETOOMANYREFS)" : strerror(err));
		(void)send_one(client, "error", -1, MSG_DONTWAIT, "connect", reason);
	}
	close(pair[0]);
	close(pair[1]);
	close(client);
}

/* remove_state removes the sandbox's state directory: every entry (all
 * files the sandbox's own programs made, none a directory), then the
 * directory, under the lock this process holds. */
static void remove_state(const char *name)
{
	int fd = openat(fds[STATE_DIR], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, "lock") != 0)
			(void)unlinkat(fds[STATE_DIR], e->d_name, 0);
	}
	closedir(d);
	/* The lock last: until it is gone, a client sees the sandbox alive
	 * (its lock held), not a dead one to remove beside this. */
	(void)unlinkat(fds[STATE_DIR], "lock", 0);
	(void)unlinkat(fds[STATE_PARENT], name, AT_REMOVEDIR);
}

int monitor_main(int argc, char **argv);

int monitor_main(int argc, char **argv)
{
	prctl(PR_SET_NAME, "jail-monitor", 0, 0, 0);
	if (argc != 2 + NFDS || strcmp(argv[0], "jail:monitor") != 0 || argv[1][0] == '\0' || strchr(argv[1], '/') != NULL ||
	    strcmp(argv[1], ".") == 0 || strcmp(argv[1], "..") == 0) {
		fputs("jail: this program is started by jail only\n", stderr);
		return 125;
	}
	const char *name = argv[1];
	for (int i = 0; i < NFDS; i++) {
		char *end;
		errno = 0;
		long fd = strtol(argv[2 + i], &end, 10);
		if (errno != 0 || *end != '\0' || end == argv[2 + i] || fd < 3 || fd > 1 << 20 || fcntl((int)fd, F_GETFD) < 0) {
			fprintf(stderr, "jail: monitor: descriptor %s missing\n", argv[2 + i]);
			return 125;
		}
		fds[i] = (int)fd;
		(void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
	}
	signal(SIGPIPE, SIG_IGN);
	/* The kernel bounds the descriptors a uid has in flight by the
	 * sender's soft RLIMIT_NOFILE; the sandbox's commands get at most half
	 * the hard limit (init.c's command_files), so the monitor's attach
	 * keeps room at the whole of it. */
	struct rlimit files;
	if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != files.rlim_max) {
		files.rlim_cur = files.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &files);
	}
	/* A monitor outlives whoever made it: no terminal, nothing to print
	 * to. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		for (int fd = 0; fd <= 2; fd++)
			dup2(null, fd);
		close(null);
	}

	for (;;) {
		struct pollfd pfd[2] = {{.fd = fds[INIT_PIDFD], .events = POLLIN}, {.fd = fds[LISTENER], .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents != 0)
			break;
		if (pfd[1].revents != 0) {
			int client = accept4(fds[LISTENER], NULL, NULL, SOCK_CLOEXEC);
			if (client >= 0)
				serve_client(client);
		}
	}
	(void)unlinkat(fds[STATE_DIR], "ctl.sock", 0);
	siginfo_t info;
	memset(&info, 0, sizeof(info));
	int status = 1;
	/* The pidfd may be non-blocking (as Go opens it), where waitid would
	 * not wait for an init that has not ended yet. */
	int flags = fcntl(fds[INIT_PIDFD], F_GETFL);
	if (flags >= 0 && (flags & O_NONBLOCK) != 0)
		(void)fcntl(fds[INIT_PIDFD], F_SETFL, flags & ~O_NONBLOCK);
	int got;
	do
		got = waitid((idtype_t)P_PIDFD, (id_t)fds[INIT_PIDFD], &info, WEXITED);
	while (got != 0 && errno == EINTR);
	if (got == 0)
		status = info.si_code == CLD_EXITED && info.si_status == 0 ? 0 : 1;
	if (status == 0)
		remove_state(name);
	return 0;
}
