/*
 * init is a sandbox's init: the process the supervisor starts inside the
 * sandbox's new namespaces, which builds its root and starts its command.
 * It is C, without a language runtime to start: the Go runtime's start cost
 * 1.9 ms of CPU and 199 page faults per sandbox here, against 0.4 ms and
 * 28 for a static C program, and four times as long as that under software
 * emulation. Read it top to bottom: the order of the steps in main and
 * build_root is the security argument.
 *
 * It is one half of jail's helper program (package programs, built by
 * helper/build.sh): the same static binary is the per-sandbox cgroup
 * janitor (../janitor/janitor.c) when started as "jail:cgroup-janitor".
 *
 * The supervisor starts it as argv[0] "jail:init" in fresh user, mount,
 * pid, net, ipc, uts (and cgroup) namespaces, with the control socket at
 * descriptor 3 and the plan's files above it. It reads the sandbox's
 * description, builds the root filesystem and pivots into it, sets host
 * name, loopback and rlimits, enters its v1 cgroup when the supervisor made
 * it meanwhile (and only then makes its cgroup namespace), joins a fresh
 * session keyring, reduces its capabilities' bounding set to the profile's
 * (capabilities confined to the sandbox's user namespace) and sets
 * no_new_privs, reports ready, waits for the release, forks the command and
 * stays behind as pid 1: it reaps orphans and reports how the command
 * ended.
 *
 * Invariants: the init is non-dumpable before anything
 * of the sandbox runs; every descriptor but stdio is close-on-exec; the
 * command's process loads the profile's seccomp filter last, just before
 * its exec (the init itself is never filtered: it must still reap, kill
 * and report whatever the profile allows). Every path inside the new root
 * is resolved with openat2(RESOLVE_IN_ROOT), so no symlink of a root
 * filesystem can redirect a mount. Input comes only from the supervisor
 * and is still decoded defensively (wire.h, generated): every count is
 * checked against what the message holds, every string must be free of
 * NUL bytes. Every fixed-size buffer is written through format (a path or
 * option that does not fit is an error) or message (a cut text ends in
 * "...").
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>

#ifndef __GLIBC__
/*
 * musl, which jail builds this with (its static start skips glibc's CPU
 * feature probing, a third of a millisecond of CPUID instructions per exec
 * in a virtual machine), has no wrappers for the new mount API or
 * close_range: the kernel's own definitions and syscall(2). glibc (2.36)
 * declares them in <sys/mount.h> and <unistd.h>.
 */
#include <linux/close_range.h>
#include <linux/mount.h>

static int open_tree(int dirfd, const char *path, unsigned int flags)
{
	return (int)syscall(SYS_open_tree, dirfd, path, flags);
}

static int move_mount(int from_dirfd, const char *from_path, int to_dirfd, const char *to_path, unsigned int flags)
{
	return (int)syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags);
}

static int mount_setattr(int dirfd, const char *path, unsigned int flags, struct mount_attr *attr, size_t size)
{
	return (int)syscall(SYS_mount_setattr, dirfd, path, flags, attr, size);
}

static int close_range(unsigned int first, unsigned int last, int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}
#endif

/* ------------------------------------------------------------------ */
/* Failures                                                           */
/* ------------------------------------------------------------------ */

/*
 * Every fixed-size buffer is written through one of these two. format is
 * for what is used (a path, mount options): one that does not fit is an
 * error (ENAMETOOLONG), never a shorter path or option used instead.
 * message is for what is only read by people (a step, a reason): one that
 * does not fit ends in "...", so a cut message says it is cut.
 */
static int format(char *buf, size_t size, const char *fmt, ...) __attribute__((__format__(__printf__, 3, 4)));

static int format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		if (size > 0)
			buf[0] = '\0';
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* mark_cut ends buf (of size bytes) in "..." when n, what vsnprintf
 * wanted to write, did not fit. */
static void mark_cut(char *buf, size_t size, int n)
{
	if (n >= 0 && (size_t)n < size)
		return;
	if (size >= 4)
		memcpy(buf + size - 4, "...", 4);
	else if (size > 0)
		buf[0] = '\0';
}

static void message(char *buf, size_t size, const char *fmt, ...) __attribute__((__format__(__printf__, 3, 4)));

static void message(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	mark_cut(buf, size, n);
}

/*
 * A failure is reported to the supervisor as "jail: <step>: <reason>", or,
 * when the command itself cannot be started, as an exec error with the
 * status the caller gets (126, 127).
 */
struct failure {
	char step[PATH_MAX + 64];
	char reason[2 * PATH_MAX + 256];
	int exec_code; /* 0: a setup error */
};

/*
 * errtext is err's text from the C library, its first letter lowercased so
 * that it reads as the rest of jail's messages ("jail: exec ./x: no such
 * file or directory").
 */
static const char *errtext(int err, char *buf, size_t size)
{
	snprintf(buf, size, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && buf[1] >= 'a' && buf[1] <= 'z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

static int fail(struct failure *f, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct failure *f, const char *step, const char *fmt, ...)
{
	va_list ap;
	message(f->step, sizeof(f->step), "%s", step);
	va_start(ap, fmt);
	mark_cut(f->reason, sizeof(f->reason), vsnprintf(f->reason, sizeof(f->reason), fmt, ap));
	va_end(ap);
	f->exec_code = 0;
	return -1;
}

/* fail_errno fails step with errno's text after an optional prefix. */
static int fail_errno(struct failure *f, const char *step, const char *prefix)
{
	char text[128];
	errtext(errno, text, sizeof(text));
	if (prefix != NULL && prefix[0] != '\0')
		return fail(f, step, "%s: %s", prefix, text);
	return fail(f, step, "%s", text);
}

/* ------------------------------------------------------------------ */
/* The control protocol (internal/control; wire.h is generated)      */
/* ------------------------------------------------------------------ */

/*
 * The message records, their decoder and encoder are generated from the
 * protocol's Go types (internal/control/gen): wire.h.
 */
#include "wire.h"

enum {
	CONTROL_FD = 3,
	MAX_FILES = WIRE_MAX_FILES,
	MAX_MESSAGE = WIRE_MAX_MESSAGE,
	BPF_MAX_INSNS = 4096,
};

/* message is one message received, and the descriptors sent with it. */
struct message {
	struct wire_message body;
	const char *kind;
	const struct config *config;
	const struct process *process;
	int fds[MAX_FILES];
	int nfds;
};

static void *xcalloc(size_t n, size_t size)
{
	return wire_alloc(n, size);
}

static int64_t now(void);

/* read_full_by reads size bytes, failing once deadline (a reading of now,
 * 0: none) has passed between reads. */
static int read_full_by(int fd, void *buf, size_t size, int64_t deadline)
{
	unsigned char *p = buf;
	while (size > 0) {
		ssize_t n = read(fd, p, size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		size -= (size_t)n;
		if (size > 0 && deadline != 0 && now() > deadline)
			return -1;
	}
	return 0;
}


/* recv_message_bounded reads one message of at most max bytes and the
 * descriptors sent with it, whole by deadline (0: none). */
static int recv_message_bounded(int sock, struct message *m, uint32_t max, int64_t deadline);

/* recv_message reads one message and the descriptors sent with it. */
static int recv_message(int sock, struct message *m)
{
	return recv_message_bounded(sock, m, MAX_MESSAGE, 0);
}

/* refuse_message lets go of what a message that is refused brought: its
 * descriptors (a client could otherwise fill the init's table with them,
 * or hold open through it what they name) and whatever was decoded. */
static int refuse_message(struct message *m)
{
	for (int i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	wire_free(&m->body);
	memset(m, 0, sizeof(*m));
	return -1;
}

static int recv_message_bounded(int sock, struct message *m, uint32_t max, int64_t deadline)
{
	memset(m, 0, sizeof(*m));
	unsigned char hdr[4];
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FILES)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->nfds < MAX_FILES)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
	if ((msg.msg_flags & MSG_CTRUNC) != 0)
		return refuse_message(m);
	if (n < 4 && read_full_by(sock, hdr + n, 4 - (size_t)n, deadline) != 0)
		return refuse_message(m);
	uint32_t size = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (size > MAX_MESSAGE || size > max)
		return refuse_message(m);
	unsigned char *body = xcalloc(size, 1);
	int ok = read_full_by(sock, body, size, deadline) == 0 && wire_decode(body, size, &m->body) == 0;
	free(body);
	/* A spawn is for a forker, never for an init. */
	if (!ok || m->body.spawn != NULL)
		return refuse_message(m);
	m->kind = m->body.kind;
	m->config = m->body.config;
	m->process = m->body.process;
	return 0;
}

/* report is a message from the init: the fields an init ever sets. */
struct report {
	const char *kind, *step, *reason;
	int code, signal, pid;
	int64_t running, built;
	uint64_t exec; /* the command of a persistent sandbox it is about */
	int64_t cpu, max_rss; /* a persistent sandbox's command's, at its exit */
	int commands;         /* a status: commands running */
	bool others, stopped; /* a status: processes but the init; the mark */
	int64_t active;       /* a status: the last command's start or end */
	int64_t total;        /* a status: commands started so far */
};

/* send_report sends rep to sock, blocking until it is sent; send_report_to
 * with dontwait set gives up (-1) where it would block, for a client's
 * connection, whose client may not be reading: the init serves every
 * connection and must wait on none. */
static int send_report_to(int sock, const struct report *rep, const int *fds, int nfds, bool dontwait);

/* MAX_REPORT_FILES bounds the descriptors one report carries: the most
 * listeners open_listeners opens. */
enum { MAX_REPORT_FILES = 16 };

static int send_report(int sock, const struct report *rep, const int *fds, int nfds)
{
	return send_report_to(sock, rep, fds, nfds, false);
}

static int send_report_to(int sock, const struct report *rep, const int *fds, int nfds, bool dontwait)
{
	struct wire_writer w = {0};
	for (int i = 0; i < 4; i++)
		wire_put_byte(&w, 0); /* the length, filled in below */
	struct wire_message body = {
		.kind = (char *)rep->kind, .step = (char *)rep->step, .reason = (char *)rep->reason,
		.code = rep->code, .signal = rep->signal, .pid = rep->pid,
		.running = rep->running, .built = rep->built, .exec = rep->exec,
		.cpu = rep->cpu, .max_rss = rep->max_rss, .commands = rep->commands,
		.others = rep->others, .stopped = rep->stopped, .active = rep->active,
		.total = rep->total,
	};
	wire_encode(&w, &body);
	uint32_t size = (uint32_t)(w.len - 4);
	for (int i = 0; i < 4; i++)
		w.buf[i] = (unsigned char)(size >> (8 * i));

	/* A pidfd and a terminal, or the gateway's listeners (MAX_LISTENERS). */
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_REPORT_FILES)];
		struct cmsghdr align;
	} control;
	struct iovec iov = {w.buf, w.len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds < 0 || nfds > MAX_REPORT_FILES) {
		free(w.buf);
		errno = EINVAL;
		return -1;
	}
	if (nfds > 0) {
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	int flags = MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0);
	ssize_t n;
	do
		n = sendmsg(sock, &msg, flags);
	while (n < 0 && errno == EINTR);
	size_t done = n < 0 ? 0 : (size_t)n;
	while (n >= 0 && done < w.len) {
		n = send(sock, w.buf + done, w.len - done, flags);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n > 0)
			done += (size_t)n;
	}
	free(w.buf);
	return n < 0 ? -1 : 0;
}

/* report_failure reports f; exec names the command of a persistent sandbox
 * that failed to start, or is 0 when the sandbox failed. */
static int report_failure_to(int sock, const struct failure *f, uint64_t exec, bool dontwait);

static int report_failure(int sock, const struct failure *f, uint64_t exec)
{
	return report_failure_to(sock, f, exec, false);
}

static int report_failure_to(int sock, const struct failure *f, uint64_t exec, bool dontwait)
{
	struct report rep = {.exec = exec};
	if (f->exec_code != 0) {
		rep.kind = "exec-error";
		rep.code = f->exec_code;
		rep.reason = f->reason;
	} else {
		rep.kind = "error";
		rep.step = f->step;
		rep.reason = f->reason;
	}
	return send_report_to(sock, &rep, NULL, 0, dontwait);
}

/* ------------------------------------------------------------------ */
/* Paths inside the new root                                          */
/* ------------------------------------------------------------------ */

/* The lists, generated from package layout (internal/layout). */
#include "layout.h"

static bool in_list(const char *const *list, const char *s)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return true;
	return false;
}

/* The staging tmpfs, in the sandbox's mount namespace only. */
#define STAGE_DIR "/tmp"
#define MASK_FILE STAGE_DIR "/mask-file"
#define MASK_DIR STAGE_DIR "/mask-dir"
#define SKELETON STAGE_DIR "/skeleton"
#define ROOT_DIR STAGE_DIR "/root"

#define ATTR_RO (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define ATTR_RW (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define FLAGS_FRESH (MS_NOSUID | MS_NODEV)

enum { MAX_SKELETON_TOPS = 64 };

/* builder carries the handles of one build of the root. */
struct builder {
	const struct config *cfg;
	struct failure *f;
	int root;            /* the new root, O_PATH */
	char skeleton_tops[MAX_SKELETON_TOPS][NAME_MAX + 1];
	int nskeleton_tops;  /* host top-level directories with a skeleton */
};

/*
 * open_in_root opens path as an O_PATH handle, resolving every component
 * (symlinks and ".." included) as if root were "/": the kernel's
 * RESOLVE_IN_ROOT never lets resolution leave it. -1 with errno set.
 */
static int open_in_root(int root, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	for (int attempt = 0;; attempt++) {
		long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));
		/* EAGAIN: a concurrent rename made ".." resolution unsafe. */
		if (fd < 0 && errno == EAGAIN && attempt < 16)
			continue;
		return (int)fd;
	}
}

/* mkdir_all_in_root opens directory path inside root, creating the
 * missing components: each is made in its parent's resolved handle, so a
 * symlink can never place it elsewhere. */
static int mkdir_all_in_root(int root, const char *path)
{
	int dir = open_in_root(root, "/");
	if (dir < 0)
		return -1;
	char prefix[PATH_MAX] = "";
	size_t plen = 0;
	const char *p = path;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);
		if (plen + len + 2 >= sizeof(prefix) || len >= NAME_MAX + 1) {
			close(dir);
			errno = ENAMETOOLONG;
			return -1;
		}
		char name[NAME_MAX + 1];
		memcpy(name, p, len);
		name[len] = '\0';
		prefix[plen++] = '/';
		memcpy(prefix + plen, p, len);
		plen += len;
		prefix[plen] = '\0';
		p = end;
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0) {
			close(dir);
			errno = EINVAL;
			return -1;
		}
		int next = open_in_root(root, prefix);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(dir, name, 0755) != 0 && errno != EEXIST) {
				int saved = errno;
				close(dir);
				errno = saved;
				return -1;
			}
			next = open_in_root(root, prefix);
		}
		int saved = errno;
		close(dir);
		errno = saved;
		if (next < 0)
			return -1;
		struct stat st;
		if (fstat(next, &st) != 0 || !S_ISDIR(st.st_mode)) {
			close(next);
			errno = ENOTDIR;
			return -1;
		}
		dir = next;
	}
	return dir;
}

/* dir resolves path inside the new root, creating missing directories. */
static int root_dir(struct builder *b, const char *path)
{
	int fd = open_in_root(b->root, path);
	if (fd >= 0)
		return fd;
	return mkdir_all_in_root(b->root, path);
}

/* root_file resolves path inside the new root as a file to mount on,
 * creating it (and its parents) if missing. */
static int root_file(struct builder *b, const char *path)
{
	int fd = open_in_root(b->root, path);
	if (fd >= 0)
		return fd;
	char parent[PATH_MAX];
	if ((size_t)snprintf(parent, sizeof(parent), "%s", path) >= sizeof(parent)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	char *slash = strrchr(parent, '/');
	if (slash == NULL) {
		errno = EINVAL;
		return -1;
	}
	const char *name = path + (slash - parent) + 1;
	if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	int dir = mkdir_all_in_root(b->root, parent);
	if (dir < 0)
		return -1;
	fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno != EEXIST) {
		close(dir);
		return -1;
	}
	if (fd >= 0)
		close(fd);
	fd = open_in_root(dir, name);
	int saved = errno;
	close(dir);
	errno = saved;
	return fd;
}

/* top_dir opens one of the top-level directories jail mounts kernel
 * filesystems or scratch space on. It must be a real directory of the
 * root: a root filesystem whose /dev or /proc is a symlink could otherwise
 * steer those mounts (CVE-2026-41579), so it is refused. */
static int top_dir(struct builder *b, const char *path, const char *step)
{
	const char *name = path + 1;
	if (mkdirat(b->root, name, 0755) != 0 && errno != EEXIST && errno != EROFS && errno != EACCES)
		return fail_errno(b->f, step, NULL);
	int fd = openat(b->root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return fail(b->f, step, "%s in the root filesystem is not a directory (a symlink?): refused", path);
	if (fd < 0)
		return fail_errno(b->f, step, NULL);
	return fd;
}

/* attach clones the mount at (dirfd, path), sets attrs on the clone while
 * it is still detached, and moves it onto target. */
static int attach(int dirfd, const char *path, int target, uint64_t attrs, bool recursive, const char **what)
{
	unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
	unsigned set_flags = AT_EMPTY_PATH;
	if (path[0] == '\0')
		flags |= AT_EMPTY_PATH;
	if (recursive) {
		flags |= AT_RECURSIVE;
		set_flags |= AT_RECURSIVE;
	}
	int tree = open_tree(dirfd, path, flags);
	if (tree < 0) {
		*what = "open_tree";
		return -1;
	}
	if (attrs != 0) {
		struct mount_attr attr = {.attr_set = attrs};
		if (mount_setattr(tree, "", set_flags, &attr, sizeof(attr)) != 0) {
			int saved = errno;
			close(tree);
			errno = saved;
			*what = "mount_setattr";
			return -1;
		}
	}
	int err = move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	int saved = errno;
	close(tree);
	errno = saved;
	if (err != 0)
		*what = "move_mount";
	return err;
}

/* attach_step is attach, failing step with the syscall that failed. */
static int attach_step(struct builder *b, const char *step, int dirfd, const char *path, int target, uint64_t attrs, bool recursive)
{
	const char *what = "";
	if (attach(dirfd, path, target, attrs, recursive, &what) != 0)
		return fail_errno(b->f, step, what);
	return 0;
}

/* mount_at mounts a fresh filesystem on the directory target refers to. */
static int mount_at(const char *source, int target, const char *fstype, unsigned long flags, const char *data)
{
	char path[64];
	if (format(path, sizeof(path), "/proc/self/fd/%d", target) != 0)
		return -1;
	return mount(source, path, fstype, flags, data);
}

/* tmpfs_at mounts a fresh tmpfs at path with the octal mode and size
 * (bytes, 0 for the kernel's default). */
static int tmpfs_at(struct builder *b, const char *path, const char *mode, int64_t size)
{
	char step[PATH_MAX + 16];
	message(step, sizeof(step), "create %s", path);
	int target;
	if (strcmp(path, "/tmp") == 0 || strcmp(path, "/run") == 0) {
		target = top_dir(b, path, step);
		if (target < 0)
			return -1;
	} else if ((target = root_dir(b, path)) < 0) {
		return fail_errno(b->f, step, NULL);
	}
	char opts[128];
	int err = size > 0 ? format(opts, sizeof(opts), "mode=%s,size=%lld", mode, (long long)size)
			   : format(opts, sizeof(opts), "mode=%s", mode);
	if (err == 0)
		err = mount_at("tmpfs", target, "tmpfs", FLAGS_FRESH, opts);
	close(target);
	if (err != 0) {
		message(step, sizeof(step), "mount %s", path);
		return fail_errno(b->f, step, NULL);
	}
	return 0;
}

/* open_verified opens a canonical host path without following any
 * symlink and checks it is the object the supervisor validated. */
static int open_verified(const char *path, uint64_t dev, uint64_t ino, char *why, size_t size)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	char text[128];
	if (fd < 0) {
		message(why, size, "openat2 %s: %s", path, errtext(errno, text, sizeof(text)));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		message(why, size, "%s", errtext(errno, text, sizeof(text)));
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino) {
		message(why, size, "%s changed after it was checked", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* open_devices opens the host's device nodes and checks their numbers, so
 * a swapped node (CVE-2025-31133) is refused. */
static int open_devices(int *fds, char *why, size_t size)
{
	for (size_t i = 0; i < NDEVICES; i++) {
		char path[32];
		fds[i] = format(path, sizeof(path), "/dev/%s", host_devices[i].name) != 0 ? -1 : open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		char text[128];
		if (fds[i] < 0 || fstat(fds[i], &st) != 0) {
			message(why, size, "open %s: %s", path, errtext(errno, text, sizeof(text)));
			return -1;
		}
		if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != host_devices[i].major || minor(st.st_rdev) != host_devices[i].minor) {
			message(why, size, "%s is not the character device %u:%u", path, host_devices[i].major, host_devices[i].minor);
			return -1;
		}
	}
	return 0;
}

/* is_missing walks rel below tree without following symlinks and reports
 * whether a component is missing (1), or not (0). A path through a
 * symlink or a non-directory counts as present: it is resolved inside the
 * new root. */
static int is_missing(int tree, const char *rel)
{
	int cur = dup(tree);
	if (cur < 0)
		return -1;
	char copy[PATH_MAX];
	if (format(copy, sizeof(copy), "%s", rel) != 0) {
		close(cur);
		return -1;
	}
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
		struct stat st;
		if (fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			int err = errno;
			close(cur);
			errno = err;
			return err == ENOENT ? 1 : -1;
		}
		char *rest = save;
		bool last = rest == NULL || *rest == '\0';
		if (!S_ISDIR(st.st_mode) || last) {
			close(cur);
			return 0;
		}
		int next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		if (next < 0)
			return -1;
		cur = next;
	}
	close(cur);
	return 0;
}

/* create_below creates rel below base (the skeleton, on the stage, which
 * only the init has written): the components that exist in the tree
 * become plain directories holding the missing rest. */
static int create_below(const char *base, const char *rel, bool dir)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", base, rel) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (dir)
		return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* clean_relative turns an absolute path into its components joined by
 * single slashes, without a leading slash ("." dropped); -1 with errno
 * set when it does not fit. */
static int clean_relative(const char *path, char *out, size_t size)
{
	size_t n = 0;
	out[0] = '\0';
	for (const char *p = path; *p != '\0';) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n + len + 2 > size) {
				errno = ENAMETOOLONG;
				return -1;
			}
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
			out[n] = '\0';
		}
		p = end;
	}
	return 0;
}

static bool has_skeleton(const struct builder *b, const char *name)
{
	for (int i = 0; i < b->nskeleton_tops; i++)
		if (strcmp(b->skeleton_tops[i], name) == 0)
			return true;
	return false;
}

/* plan_skeleton finds the mountpoints that exist in none of trees (the
 * host tree, or the root's layers) and creates them in the skeleton. */
static int plan_skeleton(struct builder *b, const int *trees, size_t ntrees)
{
	const struct config *c = b->cfg;
	struct point {
		const char *path;
		bool dir;
	} *points = xcalloc(8 + c->nmounts, sizeof(struct point));
	size_t npoints = 0;
	int err = 0;
	if (!c->rootfs.host_tree) {
		const char *fixed[] = {"/proc", "/dev", "/sys", "/tmp", "/run"};
		for (size_t i = 0; i < 5; i++)
			points[npoints].path = fixed[i], points[npoints++].dir = true;
		if (c->rootfs.home[0] != '\0')
			points[npoints].path = c->rootfs.home, points[npoints++].dir = true;
	}
	for (size_t i = 0; i < c->nmounts; i++)
		points[npoints].path = c->mounts[i].destination, points[npoints++].dir = c->mounts[i].source_is_dir;

	for (size_t i = 0; err == 0 && i < npoints; i++) {
		char rel[PATH_MAX], top[PATH_MAX];
		if (clean_relative(points[i].path, rel, sizeof(rel)) != 0) {
			err = fail_errno(b->f, "prepare mountpoints", points[i].path);
			break;
		}
		if (format(top, sizeof(top), "%s", rel) != 0) {
			err = fail_errno(b->f, "prepare mountpoints", points[i].path);
			break;
		}
		char *slash = strchr(top, '/');
		if (slash != NULL)
			*slash = '\0';
		if (c->rootfs.host_tree && (in_list(host_top_level_replaced, top) || slash == NULL))
			continue; /* inside the root tmpfs or a fresh tmpfs */
		bool present = false;
		for (size_t t = 0; t < ntrees; t++) {
			int missing = is_missing(trees[t], rel);
			if (missing < 0) {
				err = fail_errno(b->f, "prepare mountpoints", points[i].path);
				break;
			}
			present = present || missing == 0;
		}
		if (err != 0 || present)
			continue;
		if (create_below(SKELETON, rel, points[i].dir) != 0) {
			err = fail_errno(b->f, "prepare mountpoints", points[i].path);
		} else if (c->rootfs.host_tree && !has_skeleton(b, top)) {
			size_t len = strlen(top);
			if (b->nskeleton_tops == MAX_SKELETON_TOPS || len > NAME_MAX) {
				err = fail(b->f, "prepare mountpoints", "%s: too many mountpoints to add", points[i].path);
			} else {
				memcpy(b->skeleton_tops[b->nskeleton_tops], top, len + 1);
				b->nskeleton_tops++;
			}
		}
	}
	free(points);
	return err;
}

/* host_top_level fills the root tmpfs with the host's top-level entries,
 * each a read-only recursive bind, except those replaced or masked. */
static int host_top_level(struct builder *b, int host_tree)
{
	int fd = openat(host_tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (d == NULL)
		return fail_errno(b->f, "read host tree", NULL);
	char step[PATH_MAX + 16];
	struct dirent *e;
	int err = 0;
	while (err == 0 && (errno = 0, e = readdir(d)) != NULL) {
		const char *name = e->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		unsigned char type = e->d_type;
		if (type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(host_tree, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (in_list(host_top_level_replaced, name)) {
			message(step, sizeof(step), "create /%s", name);
			if (mkdirat(b->root, name, 0755) != 0)
				err = fail_errno(b->f, step, NULL);
			continue;
		}
		if (type == DT_LNK) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(host_tree, name, target, sizeof(target));
			message(step, sizeof(step), "read /%s", name);
			if (n >= (ssize_t)sizeof(target)) /* no room for its end: cut */
				errno = ENAMETOOLONG, n = -1;
			if (n < 0) {
				err = fail_errno(b->f, step, NULL);
				continue;
			}
			target[n] = '\0';
			message(step, sizeof(step), "create /%s", name);
			if (symlinkat(target, b->root, name) != 0)
				err = fail_errno(b->f, step, NULL);
		} else if (type == DT_DIR) {
			message(step, sizeof(step), "create /%s", name);
			if (mkdirat(b->root, name, 0755) != 0) {
				err = fail_errno(b->f, step, NULL);
				continue;
			}
			int target = open_in_root(b->root, name);
			if (target < 0) {
				message(step, sizeof(step), "bind /%s", name);
				err = fail_errno(b->f, step, NULL);
				continue;
			}
			if (has_skeleton(b, name)) {
				/* A read-only overlay of the host directory with its
				 * skeleton on top: mountpoints the host lacks exist in
				 * the sandbox and nowhere else. */
				char opts[2 * PATH_MAX];
				message(step, sizeof(step), "overlay /%s", name);
				if (format(opts, sizeof(opts), "lowerdir=%s/%s:/%s", SKELETON, name, name) != 0 ||
				    mount_at("jail-skeleton", target, "overlay", FLAGS_FRESH | MS_RDONLY, opts) != 0) {
					if (errno == EINVAL)
						err = fail(b->f, step, "cannot add a mountpoint below /%s, which has mounts of its own beneath it", name);
					else
						err = fail_errno(b->f, step, NULL);
				}
			} else {
				message(step, sizeof(step), "bind /%s", name);
				err = attach_step(b, step, host_tree, name, target, ATTR_RO, true);
			}
			close(target);
		} else if (type == DT_REG) {
			message(step, sizeof(step), "create /%s", name);
			int f = openat(b->root, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
			if (f < 0) {
				err = fail_errno(b->f, step, NULL);
				continue;
			}
			close(f);
			message(step, sizeof(step), "bind /%s", name);
			int target = open_in_root(b->root, name);
			if (target < 0) {
				err = fail_errno(b->f, step, NULL);
				continue;
			}
			err = attach_step(b, step, host_tree, name, target, ATTR_RO, false);
			close(target);
		}
	}
	if (err == 0 && errno != 0)
		err = fail_errno(b->f, "read host tree", NULL);
	closedir(d);
	if (err != 0)
		return -1;
	const char *fixed[] = {"proc", "sys", "dev", "tmp", "run"};
	for (size_t i = 0; i < 5; i++) {
		if (mkdirat(b->root, fixed[i], 0755) != 0 && errno != EEXIST) {
			message(step, sizeof(step), "create /%s", fixed[i]);
			return fail_errno(b->f, step, NULL);
		}
	}
	return 0;
}

/* stage mounts the staging tmpfs and the new root on it. */
static int attach_layers(struct builder *b, const int *lowers);

static int stage(struct builder *b, int host_tree, const int *lowers)
{
	const struct config *c = b->cfg;
	char opts[64];
	int err = c->limits.upper_size > 0 ? format(opts, sizeof(opts), "mode=0700,size=%lld", (long long)c->limits.upper_size)
					   : format(opts, sizeof(opts), "mode=0700");
	if (err != 0 || mount("jail-stage", STAGE_DIR, "tmpfs", FLAGS_FRESH, opts) != 0)
		return fail_errno(b->f, "mount staging tmpfs", NULL);
	const char *dirs[] = {ROOT_DIR, MASK_DIR, SKELETON};
	for (size_t i = 0; i < 3; i++)
		if (mkdir(dirs[i], 0755) != 0)
			return fail_errno(b->f, "prepare stage", dirs[i]);
	if (chmod(MASK_DIR, 0555) != 0)
		return fail_errno(b->f, "prepare stage", MASK_DIR);
	int mf = open(MASK_FILE, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0000);
	if (mf < 0)
		return fail_errno(b->f, "prepare stage", MASK_FILE);
	close(mf);

	if (host_tree >= 0) {
		if (plan_skeleton(b, &host_tree, 1) != 0)
			return -1;
		if (mount("jail-root", ROOT_DIR, "tmpfs", FLAGS_FRESH, "mode=0755,size=1m") != 0)
			return fail_errno(b->f, "mount root", NULL);
	} else {
		if (attach_layers(b, lowers) != 0)
			return -1;
		if (plan_skeleton(b, lowers, c->rootfs.nlowers) != 0)
			return -1;
		if (mkdir(STAGE_DIR "/upper", 0755) != 0 || mkdir(STAGE_DIR "/work", 0755) != 0)
			return fail_errno(b->f, "prepare stage", NULL);
		/* The lowers are named by descriptor: their host paths may lie
		 * under the stage, which now covers them. */
		size_t size = 256 + 32 * c->rootfs.nlowers;
		char *data = xcalloc(size, 1);
		size_t n = 0;
		int err = format(data, size, "lowerdir=%s", SKELETON);
		for (size_t i = 0; err == 0 && i < c->rootfs.nlowers; i++) {
			n += strlen(data + n);
			err = format(data + n, size - n, ":/proc/self/fd/%d", lowers[i]);
		}
		if (err == 0) {
			n += strlen(data + n);
			err = format(data + n, size - n, ",upperdir=%s/upper,workdir=%s/work,userxattr", STAGE_DIR, STAGE_DIR);
		}
		if (err == 0)
			err = mount("jail-root", ROOT_DIR, "overlay", FLAGS_FRESH, data);
		free(data);
		if (err != 0)
			return fail_errno(b->f, "mount overlay root", NULL);
	}
	b->root = open(ROOT_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->root < 0)
		return fail_errno(b->f, "open new root", NULL);
	if (host_tree >= 0)
		return host_top_level(b, host_tree);
	return 0;
}

/* attach_layers mounts each layer that came as a detached clone (the
 * supervisor's, made as root from the directory it checked) on a directory
 * of the stage: overlayfs takes a lower layer only from this init's own
 * mount namespace. Its descriptor then names the attached mount, and is
 * used as any reopened layer's is. */
static int attach_layers(struct builder *b, const int *lowers)
{
	const struct config *c = b->cfg;
	for (size_t i = 0; i < c->rootfs.nlowers; i++) {
		if (c->rootfs.lowers[i].fd <= 0)
			continue;
		char dir[64], step[PATH_MAX + 32];
		message(step, sizeof(step), "mount root layer %s", c->rootfs.lowers[i].path);
		if (format(dir, sizeof(dir), "%s/layer-%zu", STAGE_DIR, i) != 0)
			return fail(b->f, step, "stage path too long");
		if (mkdir(dir, 0755) != 0)
			return fail_errno(b->f, step, dir);
		int target = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0)
			return fail_errno(b->f, step, dir);
		int err = move_mount(lowers[i], "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
		int saved = errno;
		close(target);
		if (err != 0) {
			errno = saved;
			return fail_errno(b->f, step, "move_mount");
		}
	}
	return 0;
}

/* create_file creates the empty file name in dir, a directory of a
 * filesystem this init just mounted, and returns an O_PATH handle of it. */
static int create_file(int dir, const char *name)
{
	int fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

/* ipc_limits bounds the System V shared memory and message queues of the
 * sandbox's own ipc namespace when the plan says (no cgroup charges them):
 * shmmax in bytes, shmall in pages, msgmni in queues, through the fresh
 * /proc (its sysctls are the writer's namespace's). */
static int ipc_limits(struct builder *b)
{
	int64_t bytes = b->cfg->limits.sysv_shm;
	if (bytes <= 0)
		return 0;
	long page = sysconf(_SC_PAGESIZE);
	struct {
		const char *path;
		int64_t value;
	} files[] = {{"/proc/sys/kernel/shmmax", bytes},
		     {"/proc/sys/kernel/shmall", bytes / (page > 0 ? page : 4096)},
		     /* Message queues: half as much again, in queues of the
		      * kernel's default 16 KiB. */
		     {"/proc/sys/kernel/msgmnb", 16384},
		     {"/proc/sys/kernel/msgmni", bytes / 2 / 16384 > 0 ? bytes / 2 / 16384 : 1}};
	struct open_how how = {.flags = O_WRONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char text[32];
		if (format(text, sizeof(text), "%lld\n", (long long)files[i].value) != 0)
			return fail_errno(b->f, "ipc limits", files[i].path);
		ssize_t n = (ssize_t)strlen(text);
		int fd = (int)syscall(SYS_openat2, b->root, files[i].path, &how, sizeof(how));
		if (fd < 0)
			return fail_errno(b->f, "ipc limits", files[i].path);
		ssize_t w = write(fd, text, (size_t)n);
		int saved = errno;
		close(fd);
		if (w != n) {
			errno = w < 0 ? saved : EIO;
			return fail_errno(b->f, "ipc limits", files[i].path);
		}
	}
	return 0;
}

/* kernel_filesystems mounts /proc, /dev and /sys, then sets the ipc
 * limits through the new /proc. */
static int kernel_filesystems(struct builder *b, const int *devices)
{
	int proc = top_dir(b, "/proc", "create /proc");
	if (proc < 0)
		return -1;
	/* hidepid=invisible hides the processes the caller may not ptrace:
	 * the non-dumpable init disappears from the command's /proc. */
	int err = mount_at("proc", proc, "proc", FLAGS_FRESH | MS_NOEXEC, "hidepid=invisible");
	close(proc);
	if (err != 0)
		return fail_errno(b->f, "mount /proc", NULL);

	int dev = top_dir(b, "/dev", "create /dev");
	if (dev < 0)
		return -1;
	err = mount_at("jail-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
	close(dev);
	if (err != 0)
		return fail_errno(b->f, "mount /dev", NULL);
	dev = top_dir(b, "/dev", "open /dev");
	if (dev < 0)
		return -1;
	char step[64];
	for (size_t i = 0; i < NDEVICES; i++) {
		int target = create_file(dev, host_devices[i].name);
		if (target < 0) {
			message(step, sizeof(step), "create /dev/%s", host_devices[i].name);
			err = fail_errno(b->f, step, NULL);
			break;
		}
		message(step, sizeof(step), "bind /dev/%s", host_devices[i].name);
		err = attach_step(b, step, devices[i], "", target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false);
		close(target);
		if (err != 0)
			break;
	}
	for (size_t i = 0; err == 0 && i < sizeof(dev_symlinks) / sizeof(dev_symlinks[0]); i++) {
		if (symlinkat(dev_symlinks[i][1], dev, dev_symlinks[i][0]) != 0) {
			message(step, sizeof(step), "create /dev/%s", dev_symlinks[i][0]);
			err = fail_errno(b->f, step, NULL);
		}
	}
	const char *subdirs[] = {"pts", "shm", "mqueue"};
	for (size_t i = 0; err == 0 && i < 3; i++) {
		if (mkdirat(dev, subdirs[i], 0755) != 0) {
			message(step, sizeof(step), "create /dev/%s", subdirs[i]);
			err = fail_errno(b->f, step, NULL);
		}
	}
	close(dev);
	if (err != 0)
		return -1;
	int pts = root_dir(b, "/dev/pts");
	if (pts < 0)
		return fail_errno(b->f, "open /dev/pts", NULL);
	err = mount_at("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
	close(pts);
	if (err != 0)
		return fail_errno(b->f, "mount /dev/pts", NULL);
	if (tmpfs_at(b, "/dev/shm", "1777", b->cfg->limits.shm_size) != 0)
		return -1;

	int sys = top_dir(b, "/sys", "create /sys");
	if (sys < 0)
		return -1;
	err = mount_at("sysfs", sys, "sysfs", FLAGS_FRESH | MS_NOEXEC | MS_RDONLY, "");
	close(sys);
	if (err != 0)
		return fail_errno(b->f, "mount /sys", NULL);
	return ipc_limits(b);
}

/* mask covers an existing path: a directory with the empty read-only
 * directory, anything else with the empty unreadable file. A path that
 * does not exist needs no mask. */
static int mask(struct builder *b, const char *path)
{
	char step[PATH_MAX + 16];
	message(step, sizeof(step), "mask %s", path);
	int target = open_in_root(b->root, path);
	/* Missing, or out of the init's reach (and so of the command's, which
	 * has fewer privileges): nothing to hide. */
	if (target < 0 && (errno == ENOENT || errno == EACCES))
		return 0;
	if (target < 0)
		return fail_errno(b->f, step, NULL);
	struct stat st;
	int err;
	if (fstat(target, &st) != 0)
		err = fail_errno(b->f, step, NULL);
	else
		err = attach_step(b, step, AT_FDCWD, S_ISDIR(st.st_mode) ? MASK_DIR : MASK_FILE, target,
				  ATTR_RO | MOUNT_ATTR_NOEXEC, false);
	close(target);
	return err;
}

/* scratch mounts the writable places: /tmp, /run, /var/tmp on the host
 * tree, and the home directory. */
static int scratch(struct builder *b)
{
	const struct config *c = b->cfg;
	if (tmpfs_at(b, "/tmp", "1777", c->limits.tmp_size) != 0 || tmpfs_at(b, "/run", "0755", c->limits.run_size) != 0)
		return -1;
	if (c->rootfs.host_tree) {
		int vt = open_in_root(b->root, "/var/tmp");
		if (vt >= 0) {
			close(vt);
			if (tmpfs_at(b, "/var/tmp", "1777", c->limits.tmp_size) != 0)
				return -1;
		}
	}
	if (c->rootfs.home[0] != '\0') {
		if (c->rootfs.read_only)
			return mask(b, c->rootfs.home);
		return tmpfs_at(b, c->rootfs.home, "0700", c->limits.home_size);
	}
	return 0;
}

/* bind_mount attaches one user mount (--workspace, --mount). */
static int bind_mount(struct builder *b, int src, const struct mount_spec *m)
{
	char step[PATH_MAX + 16];
	message(step, sizeof(step), "mount %s", m->destination);
	struct stat st;
	if (fstat(src, &st) != 0)
		return fail_errno(b->f, step, NULL);
	int target = S_ISDIR(st.st_mode) ? root_dir(b, m->destination) : root_file(b, m->destination);
	if (target < 0)
		return fail_errno(b->f, step, "create mountpoint");
	int err;
	if (m->fd >= 0) {
		/* A detached clone made as root, attributes set (and id-mapped). */
		err = move_mount(src, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
		if (err != 0)
			err = fail_errno(b->f, step, NULL);
	} else {
		err = attach_step(b, step, src, "", target, m->writable ? ATTR_RW : ATTR_RO, true);
	}
	close(target);
	return err;
}

/* MAX_FILES_WRITTEN bounds the supervisor's files, and MAX_FILE_BYTES each
 * one's size (a trust store is some hundreds of KiB). */
enum { MAX_FILES_WRITTEN = 8, MAX_FILE_BYTES = 4 << 20 };

/* write_all writes all of data to fd. */
static int write_all(int fd, const unsigned char *data, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		done += (size_t)n;
	}
	return 0;
}

/* kernel_fs_magic are the filesystems whose "regular files" are the
 * kernel's interfaces (statfs f_type): proc, sysfs, and what a bind of
 * the host's /sys or /dev could bring along. */
static const unsigned long kernel_fs_magic[] = {
	0x9fa0,     /* proc */
	0x62656572, /* sysfs */
	0x64626720, /* debugfs */
	0x74726163, /* tracefs */
	0x73636673, /* securityfs */
	0x27e0eb,   /* cgroup */
	0x63677270, /* cgroup2 */
	0xcafe4a11, /* bpf */
	0x6165676c, /* pstore */
	0xde5e81e4, /* efivarfs */
	0x62656570, /* configfs */
	0x1cd1,     /* devpts */
	0x19800202, /* mqueue */
	0x42494e4d, /* binfmt_misc */
	0x65735543, /* fusectl */
};

/* copy_root_file copies the regular file the root has at path, if any, of
 * at most room bytes, to out. Nothing else is opened for reading: the
 * path is first opened O_PATH (resolved in the root) and checked to be a
 * regular file, so a device or a FIFO an image put there is never opened;
 * nor is a file of a kernel filesystem, which an image's symlink could
 * name (/proc/self/mountinfo, /proc/keys): the copy is made before the
 * pivot and the masks, and the sandbox reads it. */
static int copy_root_file(int root, const char *path, int out, size_t room)
{
	int handle = open_in_root(root, path);
	if (handle < 0)
		return errno == ENOENT ? 0 : -1;
	struct stat st;
	struct statfs sfs;
	if (fstat(handle, &st) != 0 || fstatfs(handle, &sfs) != 0) {
		int saved = errno;
		close(handle);
		errno = saved;
		return -1;
	}
	bool kernel_fs = false;
	for (size_t i = 0; i < sizeof(kernel_fs_magic) / sizeof(kernel_fs_magic[0]); i++)
		if ((unsigned long)sfs.f_type == kernel_fs_magic[i])
			kernel_fs = true;
	if (!S_ISREG(st.st_mode) || kernel_fs) {
		close(handle);
		return 0;
	}
	if ((uint64_t)st.st_size > room) {
		close(handle);
		errno = EFBIG;
		return -1;
	}
	char reopen[64];
	if (format(reopen, sizeof(reopen), "/proc/self/fd/%d", handle) != 0) {
		close(handle);
		return -1;
	}
	int in = open(reopen, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	close(handle);
	if (in < 0)
		return -1;
	unsigned char buf[16384], last = '\n';
	size_t total = 0;
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(in);
			return -1;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (total > room) {
			close(in);
			errno = EFBIG;
			return -1;
		}
		if (write_all(out, buf, (size_t)n) != 0) {
			close(in);
			return -1;
		}
		last = buf[n - 1];
	}
	close(in);
	/* A file that did not end its last line would run into the data. */
	if (last != '\n' && write_all(out, (const unsigned char *)"\n", 1) != 0)
		return -1;
	return 0;
}

/* supervisor_files writes the supervisor's files (the egress gateway's
 * resolv.conf and trust store: docs/egress.md) under /run/egress, on the
 * sandbox's own /run, and binds each read-only over its destination: a
 * host tree's /etc cannot be written, and an image's is not changed. */
static int supervisor_files(struct builder *b)
{
	const struct config *c = b->cfg;
	if (c->nfiles == 0)
		return 0;
	if (c->nfiles > MAX_FILES_WRITTEN)
		return fail(b->f, "files", "more than %d files", MAX_FILES_WRITTEN);
	int dir = mkdir_all_in_root(b->root, "/run/egress");
	if (dir < 0)
		return fail_errno(b->f, "create /run/egress", NULL);
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct file_spec *fs = &c->files[i];
		char step[PATH_MAX + 16], name[32];
		message(step, sizeof(step), "write %s", fs->destination);
		if (fs->optional) {
			int probe = open_in_root(b->root, fs->destination);
			if (probe < 0 && errno == ENOENT)
				continue;
			if (probe < 0) {
				close(dir);
				return fail_errno(b->f, step, NULL);
			}
			close(probe);
		}
		if (fs->destination[0] != '/' || fs->data.len > MAX_FILE_BYTES) {
			close(dir);
			return fail(b->f, step, "not an absolute path, or more than %d bytes", MAX_FILE_BYTES);
		}
		if (format(name, sizeof(name), "file-%zu", i) != 0) {
			close(dir);
			return fail_errno(b->f, step, NULL);
		}
		int fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
		if (fd < 0) {
			close(dir);
			return fail_errno(b->f, step, NULL);
		}
		if ((fs->append && copy_root_file(b->root, fs->destination, fd, MAX_FILE_BYTES - fs->data.len) != 0) ||
		    write_all(fd, fs->data.data, fs->data.len) != 0) {
			int saved = errno;
			close(fd);
			close(dir);
			errno = saved;
			return fail_errno(b->f, step, NULL);
		}
		close(fd);
		int src = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (src < 0) {
			close(dir);
			return fail_errno(b->f, step, NULL);
		}
		int target = root_file(b, fs->destination);
		if (target < 0) {
			close(src);
			close(dir);
			return fail_errno(b->f, step, "create mountpoint");
		}
		int err = attach_step(b, step, src, "", target, ATTR_RO, false);
		close(target);
		close(src);
		if (err != 0) {
			close(dir);
			return -1;
		}
	}
	close(dir);
	return 0;
}

/* masks hides host secrets and kernel interfaces. */
static int masks(struct builder *b)
{
	const struct config *c = b->cfg;
	for (const char *const *p = kernel_masked; *p != NULL; p++)
		if (mask(b, *p) != 0)
			return -1;
	if (c->rootfs.host_tree) {
		for (const char *const *p = host_masked; *p != NULL; p++)
			if (mask(b, *p) != 0)
				return -1;
		for (const char *const *g = host_masked_globs; *g != NULL; g++) {
			glob_t found;
			if (glob(*g, 0, NULL, &found) != 0)
				continue;
			int err = 0;
			for (size_t i = 0; err == 0 && i < found.gl_pathc; i++)
				err = mask(b, found.gl_pathv[i]);
			globfree(&found);
			if (err != 0)
				return -1;
		}
	}
	for (size_t i = 0; i < c->nmasks; i++)
		if (mask(b, c->masks[i]) != 0)
			return -1;
	size_t nfixed = sizeof(proc_read_only) / sizeof(proc_read_only[0]) - 1;
	for (size_t i = 0; i < nfixed + c->nread_only_paths; i++) {
		const char *path = i < nfixed ? proc_read_only[i] : c->read_only_paths[i - nfixed];
		char step[PATH_MAX + 32];
		int target = open_in_root(b->root, path);
		if (target < 0 && errno == ENOENT)
			continue;
		message(step, sizeof(step), "open %s", path);
		if (target < 0)
			return fail_errno(b->f, step, NULL);
		message(step, sizeof(step), "make %s read-only", path);
		int err = attach_step(b, step, target, "", target, ATTR_RO | MOUNT_ATTR_NOEXEC, true);
		close(target);
		if (err != 0)
			return -1;
	}
	return 0;
}

/* pivot makes root the process's root and detaches the old one. */
static int pivot(int root)
{
	if (fchdir(root) != 0)
		return -1;
	/* pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching "." then removes it without a directory for it. */
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		return -1;
	if (umount2(".", MNT_DETACH) != 0)
		return -1;
	return chdir("/");
}

/*
 * build_root constructs the root filesystem and makes it the process's
 * root, in this order:
 *  1. make every mount private, so nothing propagates back to the host;
 *  2. take hold of every host object (the host tree, layers, bind sources,
 *     device nodes) by descriptor and verify it is what the supervisor
 *     checked, before anything is covered;
 *  3. build the new root on a private staging tmpfs: every bind is a
 *     detached clone whose attributes are set before it is attached, and
 *     every target is resolved inside the new root;
 *  4. mask host secrets and kernel interfaces, last, so that nothing a
 *     user mount adds can uncover them;
 *  5. pivot_root into the new root and detach the old one.
 */
static int build_root(const struct config *c, struct failure *f)
{
	char why[PATH_MAX + 256];
	/* 1. Private propagation. */
	if (mount("", "/", "", MS_REC | MS_PRIVATE, NULL) != 0)
		return fail_errno(f, "make mounts private", NULL);

	/* 2. Host objects, by descriptor. They stay open until the init
	 * execs nothing more of its own: the process is short-lived, and each
	 * is close-on-exec. */
	int host_tree = -1;
	if (c->rootfs.host_tree && (host_tree = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail_errno(f, "open host tree", NULL);
	int *lowers = xcalloc(c->rootfs.nlowers, sizeof(int));
	for (size_t i = 0; i < c->rootfs.nlowers; i++) {
		if (c->rootfs.lowers[i].fd > 0) {
			lowers[i] = c->rootfs.lowers[i].fd; /* attached in stage() */
			continue;
		}
		if ((lowers[i] = open_verified(c->rootfs.lowers[i].path, c->rootfs.lowers[i].dev, c->rootfs.lowers[i].ino, why, sizeof(why))) < 0) {
			char step[PATH_MAX + 32];
			message(step, sizeof(step), "open root layer %s", c->rootfs.lowers[i].path);
			return fail(f, step, "%s", why);
		}
	}
	int *sources = xcalloc(c->nmounts, sizeof(int));
	for (size_t i = 0; i < c->nmounts; i++) {
		const struct mount_spec *m = &c->mounts[i];
		if (m->fd >= 0) {
			sources[i] = m->fd;
			continue;
		}
		if ((sources[i] = open_verified(m->source, m->source_dev, m->source_ino, why, sizeof(why))) < 0) {
			char step[PATH_MAX + 32];
			message(step, sizeof(step), "open mount source %s", m->source);
			return fail(f, step, "%s", why);
		}
	}
	int devices[NDEVICES];
	if (open_devices(devices, why, sizeof(why)) != 0)
		return fail(f, "open host devices", "%s", why);

	/* 3. The new root, on a private stage. */
	struct builder b = {.cfg = c, .f = f, .root = -1};
	if (stage(&b, host_tree, lowers) != 0)
		return -1;
	if (kernel_filesystems(&b, devices) != 0 || scratch(&b) != 0)
		return -1;
	for (size_t i = 0; i < c->nmounts; i++)
		if (bind_mount(&b, sources[i], &c->mounts[i]) != 0)
			return -1;
	if (supervisor_files(&b) != 0)
		return -1;

	/* 4. Masks, last. */
	if (masks(&b) != 0)
		return -1;
	if (c->rootfs.host_tree || c->rootfs.read_only) {
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
		if (mount_setattr(b.root, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0)
			return fail_errno(f, "make root read-only", NULL);
	}

	/* 5. Pivot. */
	if (pivot(b.root) != 0)
		return fail_errno(f, "pivot_root", NULL);
	close(b.root);
	if (host_tree >= 0)
		close(host_tree);
	for (size_t i = 0; i < c->rootfs.nlowers; i++)
		close(lowers[i]);
	for (size_t i = 0; i < c->nmounts; i++)
		close(sources[i]);
	for (size_t i = 0; i < NDEVICES; i++)
		close(devices[i]);
	free(lowers);
	free(sources);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The process                                                        */
/* ------------------------------------------------------------------ */

static int64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* take_root makes the init sandbox root. Started as host root before its
 * ids were mapped, it is unmapped until then: it could neither own what it
 * creates nor pass ids on to the command. */
static int take_root(struct failure *f)
{
	if (syscall(SYS_setgroups, 0, NULL) != 0)
		return fail_errno(f, "take sandbox root", "setgroups");
	if (syscall(SYS_setresgid, 0, 0, 0) != 0)
		return fail_errno(f, "take sandbox root", "setresgid");
	if (syscall(SYS_setresuid, 0, 0, 0) != 0)
		return fail_errno(f, "take sandbox root", "setresuid");
	return 0;
}

/* enter_tasks moves the init into the sandbox's v1 cgroup: writing 0 to a
 * tasks file moves the writer, without the global lock that moving another
 * task takes. The files were opened by the supervisor; the kernel checks
 * the opener's credentials. The cgroup namespace is made after the move,
 * so that it is rooted at the sandbox's cgroup. */
static int enter_tasks(const int *fds, int nfds, struct failure *f)
{
	if (nfds == 0)
		return fail(f, "cgroup", "no cgroup to enter");
	for (int i = 0; i < nfds; i++) {
		if (write(fds[i], "0", 1) != 1) {
			char what[64];
			message(what, sizeof(what), "enter tasks file %d", i);
			return fail_errno(f, "cgroup", what);
		}
	}
	if (unshare(CLONE_NEWCGROUP) != 0)
		return fail_errno(f, "cgroup", "cgroup namespace");
	return 0;
}

/* enter_cgroup reads the cgroup message, which the supervisor sends once it
 * has made the sandbox's v1 cgroup (while the init built the root), and
 * enters that cgroup. */
static int enter_cgroup(int sock, struct failure *f)
{
	struct message m;
	if (recv_message(sock, &m) != 0 || strcmp(m.kind, "cgroup") != 0) {
		for (int i = 0; i < m.nfds; i++)
			close(m.fds[i]);
		return fail(f, "cgroup", "supervisor went away");
	}
	int err = enter_tasks(m.fds, m.nfds, f);
	for (int i = 0; i < m.nfds; i++)
		close(m.fds[i]);
	return err;
}

static int loopback_up(struct failure *f)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail_errno(f, "network", "loopback: socket");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	int err = format(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (err == 0)
		err = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (err == 0) {
		ifr.ifr_flags |= IFF_UP;
		err = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	int saved = errno;
	close(fd);
	errno = saved;
	return err != 0 ? fail_errno(f, "network", "loopback: set up") : 0;
}

/* MAX_LISTENERS bounds the sockets the supervisor asks for: all go in
 * one report. */
enum { MAX_LISTENERS = MAX_REPORT_FILES };

/* open_listeners opens the supervisor's sockets (config.Init.Listen) in the
 * sandbox's network namespace, as sandbox root, which may bind ports below
 * 1024 there: each close-on-exec, and handed out with the ready report,
 * after which the init closes its copies. No SO_REUSEPORT: a process of the
 * sandbox can neither share nor take their addresses. */
static int open_listeners(const struct config *c, int *fds, struct failure *f)
{
	if (c->nlisten > MAX_LISTENERS)
		return fail(f, "network", "more than %d listeners", MAX_LISTENERS);
	for (size_t i = 0; i < c->nlisten; i++) {
		const struct listener *l = &c->listen[i];
		char step[96];
		message(step, sizeof(step), "listen on %.40s:%d", l->address, l->port);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)l->port)};
		if (inet_pton(AF_INET, l->address, &sa.sin_addr) != 1)
			return fail(f, step, "not an IPv4 address");
		int fd = socket(AF_INET, (l->stream ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail_errno(f, step, "socket");
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || (l->stream && listen(fd, 1024) != 0)) {
			int saved = errno;
			close(fd);
			errno = saved;
			return fail_errno(f, step, NULL);
		}
		fds[i] = fd;
	}
	return 0;
}

/* set_rlimits applies the fallback limits. RLIMIT_NPROC is counted per
 * user namespace, so it bounds this sandbox's tasks, not the caller's. */
/*
 * command_files is the RLIMIT_NOFILE of the commands: at most half the
 * init's hard limit, and at most 65536. The kernel bounds the descriptors
 * a user has in flight in unix sockets by the sender's own RLIMIT_NOFILE,
 * counted per host uid: every sandbox of a rootless user shares that uid
 * with its monitor, init and the user's jail, and every root sandbox shares
 * one with the others' inits. A command allowed as many as the init could
 * fill that count past what the init and the monitor may send, and their
 * next descriptor (an exec's pidfd, a client's connection) would fail in
 * every other sandbox of that uid. With half the limit, a command's sends
 * stop (ETOOMANYREFS) while jail's own still have room.
 */
static struct rlimit command_files;

static int command_files_limit(struct failure *f)
{
	struct rlimit own;
	if (getrlimit(RLIMIT_NOFILE, &own) != 0)
		return fail_errno(f, "rlimits", "files");
	/* The kernel compares with the sender's soft limit: the init's is
	 * raised to its hard one (its starter may have restored a lower
	 * soft limit, as Go does for its children), and the commands' hard
	 * limit is half that. */
	rlim_t soft = own.rlim_cur;
	if (own.rlim_cur != own.rlim_max) {
		struct rlimit raised = {own.rlim_max, own.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
			return fail_errno(f, "rlimits", "files");
	}
	rlim_t max = own.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : own.rlim_max;
	max /= 2;
	if (max > 65536)
		max = 65536;
	command_files.rlim_max = max;
	command_files.rlim_cur = soft < max ? soft : max;
	return 0;
}

static int set_rlimits(const struct config *c, struct failure *f)
{
	struct {
		int resource;
		int64_t value;
	} limits[] = {{RLIMIT_DATA, c->limits.rlimit_data}, {RLIMIT_NPROC, c->limits.rlimit_nproc}};
	for (size_t i = 0; i < 2; i++) {
		if (limits[i].value <= 0)
			continue;
		struct rlimit lim = {(rlim_t)limits[i].value, (rlim_t)limits[i].value};
		if (setrlimit(limits[i].resource, &lim) != 0)
			return fail_errno(f, "rlimits", NULL);
	}
	if (command_files_limit(f) != 0)
		return -1;
	if (c->limits.rlimit_stack > 0) {
		/* The hard limit bounds a stack's growth; the soft one stays
		 * small, since threads' stacks are sized from it. */
		struct rlimit lim;
		if (getrlimit(RLIMIT_STACK, &lim) != 0)
			return fail_errno(f, "rlimits", "stack");
		rlim_t max = (rlim_t)c->limits.rlimit_stack;
		if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > max)
			lim.rlim_cur = max < ((rlim_t)8 << 20) ? max : ((rlim_t)8 << 20);
		lim.rlim_max = max;
		if (setrlimit(RLIMIT_STACK, &lim) != 0)
			return fail_errno(f, "rlimits", "stack");
	}
	return 0;
}

/* open_pty allocates a terminal in the sandbox's own devpts. */
static int open_pty(uint16_t rows, uint16_t cols, int *master, int *slave, struct failure *f)
{
	*master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return fail_errno(f, "terminal", NULL);
	int unlock = 0;
	if (ioctl(*master, TIOCSPTLCK, &unlock) != 0)
		return fail_errno(f, "terminal", "unlock pty");
	/* TIOCGPTPEER opens the peer through the master itself, not by a path
	 * that something could have replaced. */
	*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*slave < 0)
		return fail_errno(f, "terminal", "open pty peer");
	if (rows > 0 && cols > 0) {
		struct winsize ws = {.ws_row = rows, .ws_col = cols};
		(void)ioctl(*master, TIOCSWINSZ, &ws);
	}
	return 0;
}

/* last_cap is the highest capability this kernel knows, asked of the
 * kernel itself (PR_CAPBSET_READ refuses one it does not know), never
 * read from a file: the container role calls it inside the container's
 * root, whose /proc/sys the image can cover with a file of its own and so
 * keep every capability above the number it wrote in the bounding set. */
static int last_cap(void)
{
	int known = 0, unknown = 64; /* CAP_CHOWN is 0; at most 64 fit */
	while (unknown - known > 1) {
		int mid = known + (unknown - known) / 2;
		if (prctl(PR_CAPBSET_READ, mid, 0, 0, 0) >= 0)
			known = mid;
		else
			unknown = mid;
	}
	return known;
}

/*
 * lock_down takes from the init the first two of the things the command
 * must not have; the command's process takes the third (its filter) just
 * before its exec. It runs before the init reports ready.
 *  1. Capabilities: the bounding set keeps only the profile's, all of
 *     them confined by the kernel to the sandbox's user namespace and to
 *     files whose owners are mapped into it; clear ambient and
 *     inheritable. Permitted and effective stay (the init still switches
 *     the command's user and signals it): the exec computes a root
 *     command's as the bounding set, and any other user's as empty.
 *  2. No exec may grant privileges (setuid bits, file capabilities).
 */
static int lock_down(uint64_t keep, struct failure *f)
{
	int last = last_cap();
	for (int c = 0; c <= last; c++)
		if ((c >= 64 || (keep & ((uint64_t)1 << c)) == 0) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			return fail_errno(f, "drop capabilities", "bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		return fail_errno(f, "drop capabilities", "ambient set");
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		return fail_errno(f, "drop capabilities", "capget");
	data[0].inheritable = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) != 0)
		return fail_errno(f, "drop capabilities", "capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return fail_errno(f, "no_new_privs", NULL);
	return 0;
}

static const char *env_value(const struct process *p, const char *key)
{
	size_t klen = strlen(key);
	for (size_t i = p->nenv; i > 0; i--)
		if (strncmp(p->env[i - 1], key, klen) == 0 && p->env[i - 1][klen] == '=')
			return p->env[i - 1] + klen + 1;
	return "";
}

static int exec_failure(struct failure *f, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int exec_failure(struct failure *f, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mark_cut(f->reason, sizeof(f->reason), vsnprintf(f->reason, sizeof(f->reason), fmt, ap));
	va_end(ap);
	f->exec_code = code;
	return -1;
}

/* check_executable: 0, 126 (not executable) or 127 (missing). */
static int check_executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return 127;
	if (S_ISDIR(st.st_mode) || (st.st_mode & 0111) == 0)
		return 126;
	return 0;
}

/* in_cwd writes into out the path rel names from the command's working
 * directory cwd (rel itself when absolute): the init checks the command
 * before the command's process changes into cwd. -1 when it does not fit:
 * a truncated path must never be checked, let alone executed. */
static int in_cwd(const char *cwd, const char *rel, int rel_len, char *out, size_t size)
{
	int n = rel[0] == '/' ? snprintf(out, size, "%.*s", rel_len, rel)
			      : snprintf(out, size, "%s/%.*s", cwd, rel_len, rel);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* look_path finds the command as a shell would, with the sandbox's PATH: a
 * name with a slash, and any relative PATH entry, from the working
 * directory. out is what to execute once there: the path as the shell
 * would give it to execve (a script's $0), relative ones included. */
static int look_path(const char *name, const char *path, const char *cwd, char *out, size_t size, struct failure *f)
{
	char full[PATH_MAX];
	if (strchr(name, '/') != NULL) {
		int n = snprintf(out, size, "%s", name);
		if (n < 0 || (size_t)n >= size || in_cwd(cwd, name, n, full, sizeof(full)) != 0)
			return exec_failure(f, 126, "exec %s: file name too long", name);
		switch (check_executable(full)) {
		case 127:
			return exec_failure(f, 127, "exec %s: no such file or directory", name);
		case 126:
			return exec_failure(f, 126, "exec %s: permission denied", name);
		}
		return 0;
	}
	if (path[0] == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	char denied[PATH_MAX] = "";
	for (const char *p = path;;) {
		const char *end = strchrnul(p, ':');
		char entry[PATH_MAX], candidate[PATH_MAX];
		int len = (int)(end - p);
		int n = len == 0 ? snprintf(entry, sizeof(entry), "%s", name)
				 : snprintf(entry, sizeof(entry), "%.*s/%s", len, p, name);
		if (n < 0 || (size_t)n >= sizeof(entry) || in_cwd(cwd, entry, n, candidate, sizeof(candidate)) != 0)
			return exec_failure(f, 126, "exec %s: a PATH entry is too long", name);
		int code = check_executable(candidate);
		if (code == 0) {
			if (format(out, size, "%s", entry) != 0)
				return exec_failure(f, 126, "exec %s: a PATH entry is too long", name);
			return 0;
		}
		if (code == 126 && denied[0] == '\0')
			message(denied, sizeof(denied), "%s", candidate);
		if (*end == '\0')
			break;
		p = end + 1;
	}
	if (denied[0] != '\0')
		return exec_failure(f, 126, "exec %s: %s: permission denied", name, denied);
	return exec_failure(f, 127, "exec %s: command not found", name);
}

static bool valid_program(const struct wire_bytes *p)
{
	return p->len > 0 && p->len % 8 == 0 && p->len / 8 <= BPF_MAX_INSNS;
}

/* load_filter installs the profile's programs on the calling process, in
 * order: the kernel runs every loaded program and the strictest answer
 * wins. no_new_privs is set. */
static int load_filter(const struct config *c)
{
	const struct wire_bytes *programs[] = {&c->seccomp.allowlist, &c->seccomp.denials, &c->seccomp.guard};
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
		if (!programs[i]->present)
			continue;
		struct sock_fprog prog = {
			.len = (unsigned short)(programs[i]->len / 8),
			.filter = (struct sock_filter *)programs[i]->data,
		};
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
			return -1;
	}
	return 0;
}

/* What the command's process leaves the init when it cannot exec, in a
 * page the two share (spawn), so that it takes no system call the filter
 * could deny. */
struct child_failure {
	int stage; /* 0: none; 1: its filter, 2: its setup, 3: the exec itself */
	int err;
};

/* What spawn hands the command's process. */
struct child_start {
	const struct config *c;
	const struct process *p;
	const char *path;
	const int *stdio;
	struct child_failure *failure;
	/* report_fd: where a process of its own memory (spawn_async) writes
	 * its failure; -1 for one that shares the init's page (spawn). */
	int report_fd;
};

static _Noreturn void child_fail(const struct child_start *cs, int stage, int err)
{
	struct child_failure *cf = cs->failure;
	cf->stage = stage;
	cf->err = err;
	if (cs->report_fd >= 0)
		(void)write(cs->report_fd, cf, sizeof(*cf));
	_exit(127);
}

/*
 * command_child runs in the command's process, from the clone to the exec:
 * its signal mask cleared, a session of its own (and its terminal), its
 * stdio, its user, its working directory, and then, last, its seccomp
 * filter. It may share the init's memory (spawn), so it calls the kernel
 * directly wherever libc keeps state of its own (musl's setresuid and
 * setgroups signal every thread; its fcntl adds a call), and writes
 * nothing but its own stack, the failure and errno; the init is suspended
 * meanwhile. Signal dispositions need no reset: the init has no handler
 * and ignores no signal (main), so only its mask is to clear.
 */
static int command_child(void *arg)
{
	const struct child_start *cs = arg;
	const struct process *p = cs->p;
	sigset_t none;
	sigemptyset(&none);
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8) != 0)
		child_fail(cs, 2, errno);
	if (setsid() < 0)
		child_fail(cs, 2, errno);
	/* Stdio: first out of the way of 0..2, then onto them. */
	int moved[3];
	for (int i = 0; i < 3; i++) {
		moved[i] = (int)syscall(SYS_fcntl, cs->stdio[i], F_DUPFD_CLOEXEC, 3);
		if (moved[i] < 0)
			child_fail(cs, 2, errno);
	}
	for (int i = 0; i < 3; i++)
		if (dup2(moved[i], i) < 0)
			child_fail(cs, 2, errno);
	if (p->tty && ioctl(0, TIOCSCTTY, 0) != 0)
		child_fail(cs, 2, errno);
	if (p->switch_user) {
		if (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, p->gid, p->gid, p->gid) != 0 ||
		    syscall(SYS_setresuid, p->uid, p->uid, p->uid) != 0)
			child_fail(cs, 2, errno);
	}
	if (command_files.rlim_max != 0 && syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &command_files, NULL) != 0)
		child_fail(cs, 2, errno);
	if (chdir(p->cwd) != 0)
		child_fail(cs, 2, errno);
	/* 3. The profile's seccomp filter, last. */
	if (load_filter(cs->c) != 0)
		child_fail(cs, 1, errno);
	execve(cs->path, p->args, p->env);
	child_fail(cs, 3, errno);
}

/* The command's process runs on this stack until its execve; spawn starts
 * one at a time, and the init waits meanwhile (CLONE_VFORK). */
static char command_stack[16384] __attribute__((aligned(16)));

/*
 * may_share_memory says whether the command's process may share the init's
 * memory until its execve. A process that changes its effective ids sets
 * its memory's dumpable flag to the host's fs.suid_dumpable (the kernel's
 * commit_creds), and until the execve that memory is the init's: with
 * suid_dumpable 1 the init would become dumpable, and a command of its uid
 * could then ptrace it or take its control socket (pidfd_getfd). 0 and 2
 * leave it as it is, not dumpable by anything in the sandbox. The setting
 * is read each time (the host's root may change it; /proc/sys is
 * read-only in the sandbox), and only for a command that changes ids.
 */
static bool may_share_memory(const struct process *p)
{
	if (!p->switch_user || (p->uid == geteuid() && p->gid == getegid()))
		return true;
	char value[2] = "";
	int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, value, sizeof(value));
	close(fd);
	return n >= 1 && (value[0] == '0' || value[0] == '2');
}

/* spawn starts the command; it returns its pid, and a pidfd of it.
 *
 * The init waits until the command's process has exec'd or failed
 * (CLONE_VFORK), which it reports in a page the two share (MAP_SHARED,
 * made once) rather than through a pipe. Where that is safe
 * (may_share_memory) the process shares all the init's memory until its
 * execve (CLONE_VM, as posix_spawn does), so nothing of the init is
 * copied; otherwise it gets a copy, as a fork. Its descriptors, working
 * directory, credentials and filter are its own either way (no
 * CLONE_FILES, CLONE_FS, CLONE_THREAD, CLONE_SIGHAND), and its execve
 * gives it a memory of its own. CLONE_PIDFD names it from the start. */
/* spawn_checks does what a start does before any clone: the program found
 * (into path), the working directory and the filter checked. */
static int spawn_checks(const struct config *c, const struct process *p, char *path, size_t size, struct failure *f)
{
	if (p->nargs == 0)
		return fail(f, "init", "no command");
	if (look_path(p->args[0], env_value(p, "PATH"), p->cwd, path, size, f) != 0)
		return -1;
	struct stat st;
	if (stat(p->cwd, &st) != 0 || !S_ISDIR(st.st_mode)) {
		char step[PATH_MAX + 16];
		message(step, sizeof(step), "workdir %s", p->cwd);
		return fail(f, step, "no such directory in the sandbox");
	}
	if (!valid_program(&c->seccomp.allowlist) || (c->seccomp.denials.present && !valid_program(&c->seccomp.denials)) ||
	    (c->seccomp.guard.present && !valid_program(&c->seccomp.guard)))
		return fail(f, "seccomp", "seccomp: not a BPF program");
	return 0;
}

/* child_failed turns what a command's process reported into f. */
static int child_failed(const struct process *p, const struct child_failure *cf, struct failure *f)
{
	char text[128];
	errtext(cf->err, text, sizeof(text));
	if (cf->stage == 1)
		return fail(f, "seccomp", "seccomp: load filter: %s", text);
	/* The child reports any failure before its exec as the exec's. */
	return exec_failure(f, cf->err == ENOENT ? 127 : 126, "exec %s: %s", p->args[0], text);
}

static int spawn(const struct config *c, const struct process *p, const int stdio[3], int *pidfd, struct failure *f)
{
	char path[PATH_MAX];
	if (spawn_checks(c, p, path, sizeof(path), f) != 0)
		return -1;

	static struct child_failure *cf;
	if (cf == NULL) {
		void *page = mmap(NULL, sizeof(*cf), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED)
			return fail_errno(f, "start", "mmap");
		cf = page;
	}
	*cf = (struct child_failure){0, 0};
	struct child_start cs = {c, p, path, stdio, cf, -1};
	int flags = CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
	if (may_share_memory(p))
		flags |= CLONE_VM;
	int fd = -1;
	pid_t pid = clone(command_child, command_stack + sizeof(command_stack), flags, &cs, &fd);
	if (pid < 0) {
		char text[128];
		errtext(errno, text, sizeof(text));
		return exec_failure(f, 126, "exec %s: %s", p->args[0], text);
	}
	if (cf->stage != 0) {
		close(fd);
		waitpid(pid, NULL, 0);
		return child_failed(p, cf, f);
	}
	/* The exec happened: the pid is ours to wait for, and the pidfd
	 * names the command until then. */
	*pidfd = fd;
	return pid;
}

/*
 * spawn_async starts a command of a persistent sandbox without waiting for
 * its exec: the init must go on serving meanwhile, since a process of the
 * sandbox may stop the command's process before its execve (SIGSTOP, kill
 * -STOP -1), which would hold a vfork's parent for as long as it likes. So
 * the process gets a copy of the init's memory (no CLONE_VM, no
 * CLONE_VFORK, as a fork) and reports a failure on a pipe, whose read end
 * comes back in *report: end of file there (the write end is
 * close-on-exec) means the exec happened. It returns the pid, and its
 * pidfd in *pidfd.
 */
static int spawn_async(const struct config *c, const struct process *p, const int stdio[3], int *pidfd, int *report, struct failure *f)
{
	char path[PATH_MAX];
	if (spawn_checks(c, p, path, sizeof(path), f) != 0)
		return -1;
	int pipefd[2];
	/* Non-blocking: the init reads it whenever it looks (finish_start). */
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0)
		return fail_errno(f, "start", "pipe");
	struct child_failure own = {0, 0}; /* the child's copy is its own */
	struct child_start cs = {c, p, path, stdio, &own, pipefd[1]};
	int fd = -1;
	/* The stack is the init's, copied into the child with the rest. */
	pid_t pid = clone(command_child, command_stack + sizeof(command_stack), CLONE_PIDFD | SIGCHLD, &cs, &fd);
	int err = errno;
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		char text[128];
		errtext(err, text, sizeof(text));
		return exec_failure(f, 126, "exec %s: %s", p->args[0], text);
	}
	*pidfd = fd;
	*report = pipefd[0];
	return pid;
}

/* reap waits for the command, reaping every orphan meanwhile, and returns
 * its status as jail reports it. */
static void reap(pid_t cmd, int *code, int *sig)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, 0);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0) {
			*code = 1, *sig = 0;
			return;
		}
		if (pid != cmd)
			continue;
		if (WIFEXITED(status)) {
			*code = WEXITSTATUS(status), *sig = 0;
			return;
		}
		if (WIFSIGNALED(status)) {
			*sig = WTERMSIG(status), *code = 128 + *sig;
			return;
		}
	}
}

/* end_remaining kills and reaps whatever the command left running, and
 * lets go of the init's stdio: after it the supervisor's output pipes are
 * at EOF, and it may answer as soon as the exit report arrives. */
static void end_remaining(void)
{
	/* kill(-1) from pid 1 reaches every other process of the namespace. */
	(void)kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) >= 0 || errno == EINTR)
		;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		for (int fd = 0; fd <= 2; fd++)
			dup3(null, fd, 0);
		close(null);
	}
}

/* Every signal gets its default action, once: the kernel delivers to a
 * pid namespace's init only the signals it handles, so those someone might
 * send the init itself are dropped (SIGKILL from outside still ends it);
 * and since the init has no handler and ignores nothing, the commands it
 * starts inherit default dispositions without resetting them each
 * (command_child). */
static void leave_signals_to_kernel(void)
{
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
}

/*
 * setup builds the sandbox, waits for the release and starts the command;
 * it returns the command's pid.
 */
static pid_t setup(const struct config *c, int sock, int64_t running, struct failure *f)
{
	if (build_root(c, f) != 0)
		return -1;
	int64_t built = now();
	if (sethostname(c->hostname, strlen(c->hostname)) != 0)
		return fail_errno(f, "set host name", NULL);
	if (loopback_up(f) != 0 || set_rlimits(c, f) != 0)
		return -1;
	int listeners[MAX_LISTENERS];
	if (open_listeners(c, listeners, f) != 0)
		return -1;
	/* Nothing of the sandbox has run yet: the init enters its cgroup
	 * now, and the command is forked inside it. */
	if (c->enter_cgroup && enter_cgroup(sock, f) != 0)
		return -1;

	int stdio[3] = {0, 1, 2};
	int master = -1, slave = -1;
	if (c->persistent && c->process.tty)
		return fail(f, "init", "a persistent sandbox has no terminal of its own");
	if (c->process.tty) {
		if (open_pty(c->process.rows, c->process.cols, &master, &slave, f) != 0)
			return -1;
		stdio[0] = stdio[1] = stdio[2] = slave;
	}

	/* A session keyring of its own, anonymous (a NULL name: a named one
	 * would be shared with whoever joins the name): the caller's may hold
	 * keys. */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
		return fail_errno(f, "session keyring", NULL);

	/* The supervisor releases the command once everything outside the
	 * sandbox is in place. */
	if (lock_down(c->capabilities, f) != 0)
		return -1;
	/* A persistent sandbox outlives the process that booted it, whose
	 * threads end when it becomes the sandbox's monitor (docs/
	 * persistent.md): its parent-death signal, tied to the thread that
	 * cloned it, would kill it then. It ends instead when its first
	 * connection hangs up, which happens when its holder or monitor
	 * ends, however that ends. */
	if (c->persistent && prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) != 0)
		return fail_errno(f, "init", "parent-death signal");
	struct report ready = {.kind = "ready", .running = running, .built = built};
	int sent = send_report(sock, &ready, listeners, (int)c->nlisten);
	for (size_t i = 0; i < c->nlisten; i++)
		close(listeners[i]);
	if (sent != 0)
		return fail_errno(f, "report ready", NULL);
	/* A persistent sandbox serves its commands from here (serve). */
	if (c->persistent)
		return 0;
	struct message release;
	if (recv_message(sock, &release) != 0 || strcmp(release.kind, "release") != 0)
		return fail(f, "wait for release", "supervisor went away");
	for (int i = 1; i < release.nfds; i++)
		close(release.fds[i]);
	const struct process *p = &c->process;
	if (release.process != NULL) {
		if (release.process->tty != p->tty)
			return fail(f, "release", "a terminal cannot be added to a built sandbox");
		p = release.process;
	}
	if (release.nfds > 0) {
		if (p->tty)
			return fail(f, "release", "stdin of a terminal command comes through the terminal");
		stdio[0] = release.fds[0];
	}

	int pidfd = -1;
	pid_t pid = spawn(c, p, stdio, &pidfd, f);
	if (release.nfds > 0)
		close(release.fds[0]);
	if (slave >= 0)
		close(slave);
	if (pid < 0) {
		if (master >= 0)
			close(master);
		return -1;
	}
	struct report started = {.kind = "started", .pid = pid};
	int fds[2] = {pidfd, master};
	int err = send_report(sock, &started, fds, master >= 0 ? 2 : 1);
	close(pidfd);
	if (master >= 0)
		close(master);
	if (err != 0)
		return fail_errno(f, "report start", NULL);
	return pid;
}

/* ------------------------------------------------------------------ */
/* A persistent sandbox: commands on request                          */
/* ------------------------------------------------------------------ */

/* At most MAX_EXECS commands at once, and MAX_CONNS connections: the
 * monitor's (conns[0], fd 3) and those it attached for clients. */
enum { MAX_EXECS = 1024, MAX_CONNS = 256 };

/* A client's connection may not hold the init in a half-sent message for
 * longer than this, each read (SO_RCVTIMEO) and the whole message
 * (client_message_ns): the init serves every connection. Nor may its
 * message be larger than an exec's command and environment need. */
static const int conn_read_timeout_s = 5;
static const int64_t client_message_ns = 5 * (int64_t)1000000000;
static const uint32_t max_client_message = 4 << 20;

/* running_exec is a command started on request, until its exit is
 * reported. */
struct running_exec {
	pid_t pid;
	uint64_t exec; /* its id, unique on its connection */
	int conn;      /* its connection's slot; -1 once that hung up */
	/* While it starts (spawn_async): the read end of its failure pipe
	 * (-1 once started), its pidfd and its terminal's master (-1: none),
	 * which go with the started report; and its end, should it be
	 * reaped before its start is told. */
	int report, pidfd, master;
	char name[128]; /* its program as asked for, for a failure's message */
	bool reaped;
	bool stopped_early; /* killed for being stopped before its execve */
	int status;
	struct rusage ru;
};

struct server {
	const struct config *c;
	int conns[MAX_CONNS]; /* -1: a free slot */
	struct running_exec list[MAX_EXECS];
	size_t n;
	bool stopped;  /* the mark of a signal-all with Stopped */
	int64_t ready; /* when serving began */
	int64_t active; /* the last command's start or end, or ready */
	int64_t total;  /* commands started so far */
	int timer;      /* a timerfd for the TTL and the idle timeout, or -1 */
	/* failed: a report to that connection could not be sent; nothing
	 * more is sent to it, and it is dropped at the end of the round
	 * (serve), however many fail in one round. */
	bool failed[MAX_CONNS];
};

/* What handling a message leads to. */
enum outcome {
	GO_ON,
	DROP_CONN, /* that connection broke the protocol or went away */
	END_SANDBOX, /* asked to end (end, TTL, idle): status 0 */
	BROKEN,      /* the monitor's connection broke the protocol or hung up */
};

/* reply sends rep on connection slot, without waiting on a client's; one
 * that cannot take it is marked failed (and -1 returned). */
static int reply(struct server *srv, int slot, const struct report *rep, const int *fds, int nfds)
{
	if (srv->failed[slot])
		return -1;
	if (send_report_to(srv->conns[slot], rep, fds, nfds, slot != 0) != 0) {
		srv->failed[slot] = true;
		return -1;
	}
	return 0;
}

static int reply_failure(struct server *srv, int slot, const struct failure *f, uint64_t exec)
{
	if (srv->failed[slot])
		return -1;
	if (report_failure_to(srv->conns[slot], f, exec, slot != 0) != 0) {
		srv->failed[slot] = true;
		return -1;
	}
	return 0;
}

/*
 * start_exec starts the command of one exec message, with the stdin,
 * stdout and stderr sent with it (or on a terminal of its own, whose
 * master goes back with the started report), and reports it started or
 * failed. The command runs with the sandbox's own description (its filter,
 * ids and root); the message brings only the process.
 */
static enum outcome start_exec(struct server *srv, int slot, const struct message *m)
{
	uint64_t id = m->body.exec;
	if (id == 0)
		return slot == 0 ? BROKEN : DROP_CONN;
	for (size_t i = 0; i < srv->n; i++)
		if (srv->list[i].conn == slot && srv->list[i].exec == id)
			return slot == 0 ? BROKEN : DROP_CONN;
	struct failure f = {0};
	const struct process *p = m->process;
	if (p == NULL || m->nfds != (p->tty ? 0 : 3)) {
		fail(&f, "exec", "an exec brings a command and its stdin, stdout and stderr, or asks for a terminal");
		return reply_failure(srv, slot, &f, id) == 0 ? GO_ON : DROP_CONN;
	}
	if (srv->n == MAX_EXECS) {
		fail(&f, "exec", "%d commands run already", MAX_EXECS);
		return reply_failure(srv, slot, &f, id) == 0 ? GO_ON : DROP_CONN;
	}
	int stdio[3] = {-1, -1, -1};
	int master = -1, slave = -1;
	if (p->tty) {
		if (open_pty(p->rows, p->cols, &master, &slave, &f) != 0) {
			if (master >= 0)
				close(master);
			return reply_failure(srv, slot, &f, id) == 0 ? GO_ON : DROP_CONN;
		}
		stdio[0] = stdio[1] = stdio[2] = slave;
	} else {
		for (int i = 0; i < 3; i++)
			stdio[i] = m->fds[i];
	}
	int pidfd = -1, report = -1;
	pid_t pid = spawn_async(srv->c, p, stdio, &pidfd, &report, &f);
	if (slave >= 0)
		close(slave);
	if (pid < 0) {
		if (master >= 0)
			close(master);
		return reply_failure(srv, slot, &f, id) == 0 ? GO_ON : DROP_CONN;
	}
	/* Its start is reported once its exec is known to have happened
	 * (finish_start), its exit after that. */
	srv->list[srv->n++] = (struct running_exec){.pid = pid, .exec = id, .conn = slot, .report = report, .pidfd = pidfd, .master = master};
	message(srv->list[srv->n - 1].name, sizeof(srv->list[srv->n - 1].name), "%s", p->args[0]);
	srv->stopped = false;
	srv->active = now();
	srv->total++;
	return GO_ON;
}

/* exit_report is the report of a command's end. */
static struct report exit_report_of(const struct running_exec *e, int status, const struct rusage *ru)
{
	struct report r = {.kind = "exit", .pid = e->pid, .exec = e->exec};
	if (WIFSIGNALED(status)) {
		r.signal = WTERMSIG(status);
		r.code = 128 + r.signal;
	} else {
		r.code = WEXITSTATUS(status);
	}
	r.cpu = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec + (int64_t)ru->ru_stime.tv_sec * 1000000 +
		ru->ru_stime.tv_usec;
	r.max_rss = ru->ru_maxrss;
	return r;
}

/* remove_exec forgets the command at index i. */
static void remove_exec(struct server *srv, size_t i)
{
	struct running_exec *e = &srv->list[i];
	if (e->report >= 0)
		close(e->report);
	if (e->pidfd >= 0)
		close(e->pidfd);
	if (e->master >= 0)
		close(e->master);
	srv->list[i] = srv->list[--srv->n];
}

/*
 * finish_start reads what the process of the starting command at index i
 * reported: nothing (end of file: its exec happened), and its start is
 * reported, with its exit if it has ended already; or its failure, which
 * is reported as the exec's. A connection that cannot take the report is
 * marked failed (reply).
 */
static void finish_start(struct server *srv, size_t i)
{
	struct running_exec *e = &srv->list[i];
	struct child_failure cf = {0, 0};
	ssize_t n;
	do
		n = read(e->report, &cf, sizeof(cf));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	close(e->report);
	e->report = -1;
	if (n == 0 && e->stopped_early) {
		/* Its end of file is its death, not its exec. */
		cf = (struct child_failure){2, EINTR};
		n = -1;
	}
	if (n != 0) {
		/* It failed (or said something unreadable): it exits 127 by
		 * itself, and is reaped as an orphan. */
		if (n != (ssize_t)sizeof(cf) && !e->stopped_early)
			cf = (struct child_failure){2, EIO};
		uint64_t id = e->exec;
		int conn = e->conn;
		struct failure f = {0};
		struct process p = {0};
		char *args[2] = {e->name, NULL};
		p.args = args;
		p.nargs = 1;
		if (e->stopped_early)
			exec_failure(&f, 126, "exec %s: stopped by a signal before its execve (killed)", e->name);
		else
			child_failed(&p, &cf, &f);
		remove_exec(srv, i);
		if (conn >= 0)
			(void)reply_failure(srv, conn, &f, id);
		return;
	}
	if (e->conn >= 0) {
		struct report started = {.kind = "started", .pid = e->pid, .exec = e->exec};
		int fds[2] = {e->pidfd, e->master};
		(void)reply(srv, e->conn, &started, fds, e->master >= 0 ? 2 : 1);
	}
	close(e->pidfd);
	e->pidfd = -1;
	if (e->master >= 0)
		close(e->master);
	e->master = -1;
	if (e->reaped) {
		if (e->conn >= 0) {
			struct report r = exit_report_of(e, e->status, &e->ru);
			(void)reply(srv, e->conn, &r, NULL, 0);
		}
		remove_exec(srv, i);
	}
}

/*
 * signal_exec sends the signal of a signal message to the process group of
 * the command it names: the command leads a session and a group of its own
 * (command_child's setsid), so what it started goes too, unless that left
 * the group itself. Only commands this init started on the same connection
 * and has not reaped can be named, so the signal never reaches a reused pid,
 * the init, or another client's command; one already reaped is dropped
 * silently (its exit is reported).
 */
static enum outcome signal_exec(struct server *srv, int slot, const struct message *m)
{
	int sig = m->body.signal;
	if (m->body.exec == 0 || sig < 1 || sig >= _NSIG || m->nfds != 0 || m->process != NULL)
		return slot == 0 ? BROKEN : DROP_CONN;
	for (size_t i = 0; i < srv->n; i++) {
		if (srv->list[i].conn == slot && srv->list[i].exec == m->body.exec) {
			/* One reaped before its start is told is gone: its pid
			 * may name another process already. */
			if (srv->list[i].reaped)
				break;
			(void)kill(-srv->list[i].pid, sig);
			/* Before its setsid, it leads no group yet. */
			if (srv->list[i].report >= 0)
				(void)kill(srv->list[i].pid, sig);
			break;
		}
	}
	return GO_ON;
}

/* reap_execs reaps every child that has ended, reporting the exit of those
 * started on request to their connection; orphans the commands left go
 * silently. A connection that cannot take its report is marked failed
 * (reply). */
static void reap_execs(struct server *srv);

/*
 * stop_watch finds the commands that were stopped (SIGSTOP, by any process
 * of the sandbox) between their clone and their execve, and kills them:
 * such a command would otherwise wait, unstarted, until someone continues
 * it, and its exec with it. What has reported its start first (or exec'd:
 * end of file) is a command like any other, which may be stopped.
 */
static void stop_watch(struct server *srv)
{
	for (size_t i = 0; i < srv->n;) {
		struct running_exec *e = &srv->list[i];
		if (e->report < 0 || e->stopped_early) {
			i++;
			continue;
		}
		pid_t pid = e->pid;
		size_t before = srv->n;
		finish_start(srv, i);
		if (srv->n != before || srv->list[i].pid != pid || srv->list[i].report < 0) {
			if (srv->n == before)
				i++;
			continue; /* started, or failed, meanwhile */
		}
		siginfo_t info;
		memset(&info, 0, sizeof(info));
		if (waitid(P_PID, (id_t)pid, &info, WSTOPPED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid &&
		    info.si_code == CLD_STOPPED) {
			srv->list[i].stopped_early = true;
			(void)kill(pid, SIGKILL);
		}
		i++;
	}
}

static void reap_execs(struct server *srv)
{
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			return;
		for (size_t i = 0; i < srv->n; i++) {
			struct running_exec *e = &srv->list[i];
			if (e->pid != pid)
				continue;
			srv->active = now();
			if (e->report >= 0) {
				/* Its start is not told yet: its end waits for it. */
				e->reaped = true;
				e->status = status;
				e->ru = ru;
				break;
			}
			struct report r = exit_report_of(e, status, &ru);
			int conn = e->conn;
			remove_exec(srv, i);
			if (conn >= 0)
				(void)reply(srv, conn, &r, NULL, 0);
			break;
		}
	}
}

/* drop_conn closes a client's connection and kills the process groups of
 * the commands it started: a client that went away (a `jail exec`
 * SIGKILLed, say) leaves nothing of its commands running. */
static void drop_conn(struct server *srv, int slot)
{
	for (size_t i = 0; i < srv->n; i++) {
		if (srv->list[i].conn == slot) {
			/* One reaped (its start not told yet) is gone, and
			 * its pid may be another's. */
			if (!srv->list[i].reaped) {
				(void)kill(-srv->list[i].pid, SIGKILL);
				if (srv->list[i].report >= 0)
					(void)kill(srv->list[i].pid, SIGKILL);
			}
			srv->list[i].conn = -1;
		}
	}
	close(srv->conns[slot]);
	srv->conns[slot] = -1;
	srv->failed[slot] = false;
}

/* attach takes the socket of an attach message as a new connection; with
 * every slot taken it says so on it and closes it. */
static void attach_conn(struct server *srv, const struct message *m)
{
	int fd = m->fds[0];
	bool room = false;
	for (int slot = 1; slot < MAX_CONNS && !room; slot++)
		room = srv->conns[slot] < 0;
	if (!room) {
		struct report full = {.kind = "error", .step = "connect", .reason = "the sandbox serves as many clients as it can already"};
		(void)send_report_to(fd, &full, NULL, 0, true);
		return;
	}
	for (int slot = 1; slot < MAX_CONNS; slot++) {
		if (srv->conns[slot] >= 0)
			continue;
		int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (own < 0)
			return;
		struct timeval limit = {.tv_sec = conn_read_timeout_s};
		(void)setsockopt(own, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
		srv->conns[slot] = own;
		return;
	}
}

/* handle acts on one message received on connection slot. */
static enum outcome handle(struct server *srv, int slot, const struct message *m)
{
	const char *kind = m->kind;
	enum outcome bad = slot == 0 ? BROKEN : DROP_CONN;
	if (strcmp(kind, "exec") == 0)
		return start_exec(srv, slot, m);
	if (strcmp(kind, "signal") == 0)
		return signal_exec(srv, slot, m);
	if (m->nfds != (strcmp(kind, "attach") == 0 ? 1 : 0) || m->process != NULL || m->config != NULL)
		return bad;
	if (strcmp(kind, "attach") == 0) {
		if (slot != 0)
			return bad;
		attach_conn(srv, m);
		return GO_ON;
	}
	if (strcmp(kind, "signal-all") == 0) {
		int sig = m->body.signal;
		if (sig < 0 || sig >= _NSIG)
			return bad;
		srv->stopped = m->body.stopped;
		/* kill(-1) from pid 1 reaches every other process of the
		 * namespace. */
		if (sig > 0)
			(void)kill(-1, sig);
		return GO_ON;
	}
	if (strcmp(kind, "status") == 0) {
		/* What has ended is reaped first, so that a status after the
		 * last process's end says so. */
		reap_execs(srv);
		struct report status = {
			.kind = "status", .commands = (int)srv->n, .stopped = srv->stopped, .active = srv->active,
			.total = srv->total,
			.others = kill(-1, 0) == 0,
		};
		return reply(srv, slot, &status, NULL, 0) == 0 ? GO_ON : DROP_CONN;
	}
	if (strcmp(kind, "end") == 0)
		return END_SANDBOX;
	return bad;
}

/* arm_timer sets srv's timer to the nearer of the TTL's end and, with no
 * command running, the idle timeout's; it reports whether either has
 * passed. */
static bool arm_timer(struct server *srv)
{
	if (srv->timer < 0)
		return false;
	int64_t due = 0;
	if (srv->c->ttl > 0)
		due = srv->ready + srv->c->ttl;
	if (srv->c->idle_timeout > 0 && srv->n == 0) {
		int64_t idle_due = srv->active + srv->c->idle_timeout;
		if (due == 0 || idle_due < due)
			due = idle_due;
	}
	if (due == 0) {
		struct itimerspec off = {0};
		(void)timerfd_settime(srv->timer, 0, &off, NULL);
		return false;
	}
	if (due <= now())
		return true;
	struct itimerspec at = {.it_value = {.tv_sec = due / 1000000000, .tv_nsec = due % 1000000000}};
	(void)timerfd_settime(srv->timer, TFD_TIMER_ABSTIME, &at, NULL);
	return false;
}

/*
 * serve runs the commands of a persistent sandbox: each exec message
 * starts one, and its exit is reported once it is gone, on the connection
 * that asked; whatever a command leaves running stays, for the next. The
 * monitor's connection (fd 3) also attaches clients' connections. When it
 * hangs up or breaks the protocol, everything is killed and the init ends
 * (status 1); an end message, the TTL or the idle timeout end it with
 * status 0, which tells the monitor that the sandbox is to be removed.
 * SIGCHLD is blocked and read from a signalfd; each command unblocks it
 * (command_child).
 */
static int serve(const struct config *c, int sock)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0)
		return 1;
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 1;
	static struct server srv;
	srv.c = c;
	for (int i = 0; i < MAX_CONNS; i++)
		srv.conns[i] = -1;
	srv.conns[0] = sock;
	srv.ready = srv.active = now();
	srv.timer = -1;
	if (c->ttl > 0 || c->idle_timeout > 0) {
		srv.timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (srv.timer < 0)
			return 1;
	}
	int status = 1;
	for (;;) {
		if (arm_timer(&srv)) {
			status = 0;
			break;
		}
		/* The signalfd, the timer, the connections, then the failure
		 * pipes of the commands starting. */
		static struct pollfd pfd[2 + MAX_CONNS + MAX_EXECS];
		static int slots[MAX_CONNS];
		static pid_t starting[MAX_EXECS];
		nfds_t n = 0;
		pfd[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = srv.timer, .events = POLLIN};
		for (int slot = 0; slot < MAX_CONNS; slot++) {
			if (srv.conns[slot] >= 0) {
				slots[n - 2] = slot;
				pfd[n++] = (struct pollfd){.fd = srv.conns[slot], .events = POLLIN};
			}
		}
		nfds_t nconns = n;
		for (size_t i = 0; i < srv.n; i++) {
			if (srv.list[i].report >= 0) {
				starting[n - nconns] = srv.list[i].pid;
				pfd[n++] = (struct pollfd){.fd = srv.list[i].report, .events = POLLIN};
			}
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* Starts first: a command's start is told before its end. */
		for (nfds_t k = nconns; k < n; k++) {
			if (pfd[k].revents == 0)
				continue;
			for (size_t i = 0; i < srv.n; i++) {
				if (srv.list[i].pid == starting[k - nconns] && srv.list[i].report >= 0) {
					finish_start(&srv, i);
					break;
				}
			}
		}
		if (pfd[0].revents != 0) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
			reap_execs(&srv);
			stop_watch(&srv);
		}
		if (pfd[1].revents != 0) {
			uint64_t ticks;
			(void)read(srv.timer, &ticks, sizeof(ticks));
		}
		enum outcome out = GO_ON;
		for (nfds_t i = 2; i < nconns && out != END_SANDBOX && out != BROKEN; i++) {
			if (pfd[i].revents == 0)
				continue;
			int slot = slots[i - 2];
			if (srv.conns[slot] < 0)
				continue;
			struct message m;
			enum outcome o;
			/* A client's message comes whole, and soon: one that
			 * trickles would hold every other connection. */
			int got = slot == 0 ? recv_message(srv.conns[slot], &m)
					    : recv_message_bounded(srv.conns[slot], &m, max_client_message, now() + client_message_ns);
			if (got != 0) {
				o = slot == 0 ? BROKEN : DROP_CONN;
			} else {
				o = handle(&srv, slot, &m);
				for (int k = 0; k < m.nfds; k++)
					close(m.fds[k]);
				wire_free_wire_message(&m.body);
			}
			if (o == DROP_CONN && slot != 0)
				drop_conn(&srv, slot);
			else if (o == DROP_CONN)
				o = BROKEN;
			out = o;
		}
		/* Every connection a report failed to this round. */
		if (srv.failed[0])
			out = BROKEN;
		for (int slot = 1; slot < MAX_CONNS; slot++)
			if (srv.failed[slot] && srv.conns[slot] >= 0)
				drop_conn(&srv, slot);
		if (out == END_SANDBOX) {
			status = 0;
			break;
		}
		if (out == BROKEN)
			break;
	}
	end_remaining();
	return status;
}

/* The container role (jail oci), which uses the helpers above. */
#include "container.c"

int janitor_main(int argc, char **argv); /* ../janitor/janitor.c */
int monitor_main(int argc, char **argv); /* ../monitor/monitor.c */

int main(int argc, char **argv)
{
	int64_t running = now();
	/* The helper program is the janitor too, started as that. */
	if (argc >= 1 && strcmp(argv[0], "jail:cgroup-janitor") == 0)
		return janitor_main(argc, argv);
	if (argc >= 1 && strcmp(argv[0], "jail:monitor") == 0)
		return monitor_main(argc, argv);
	if (argc >= 1 && strcmp(argv[0], "jail:container") == 0)
		return container_main();
	if (argc >= 1 && strcmp(argv[0], "jail:enter") == 0)
		return enter_main();
	if (argc < 1 || strcmp(argv[0], "jail:init") != 0) {
		fputs("jail: this program is started by jail only\n", stderr);
		return 125;
	}
	/* Whatever the supervisor's own parent leaked to it, nothing but
	 * stdio may reach the command. */
	if (close_range(CONTROL_FD, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		return 1;
	prctl(PR_SET_NAME, "jail-init", 0, 0, 0);
	leave_signals_to_kernel();
	/* Started by a thread that kept its capabilities across a change of
	 * its uid (SECBIT_NO_SETUID_FIXUP) to create the user namespace as its
	 * owner (spawn.StartAs): the kernel starts the new namespace's
	 * credentials with default securebits, and this makes sure of it,
	 * since the command's user switch relies on uid changes dropping
	 * capabilities. */
	int securebits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (securebits != 0 && prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) != 0)
		return 1;

	struct message msg;
	if (recv_message(CONTROL_FD, &msg) != 0 || strcmp(msg.kind, "config") != 0 || msg.config == NULL)
		return 1;
	const struct config *c = msg.config;
	struct failure f = {0};
	/* The supervisor sends the description once it has written the id
	 * maps: the init may have been started before them, and writing them
	 * needs it dumpable. */
	if (c->take_root) {
		if (take_root(&f) != 0) {
			report_failure(CONTROL_FD, &f, 0);
			return 1;
		}
		/* Changing ids cleared the parent-death signal. Should the
		 * parent have died before this, the supervisor hangs up the
		 * control socket, and the init ends at its next message. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
			return 1;
	}
	/* Not reachable through /proc or ptrace by anything in the sandbox,
	 * which starts only later. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 1;
	for (int i = 0; i < msg.nfds; i++)
		close(msg.fds[i]);

	pid_t cmd = setup(c, CONTROL_FD, running, &f);
	if (cmd < 0) {
		report_failure(CONTROL_FD, &f, 0);
		return f.exec_code != 0 ? f.exec_code : 1;
	}
	if (c->persistent)
		return serve(c, CONTROL_FD);
	int code, sig;
	reap(cmd, &code, &sig);
	end_remaining();
	struct report exit_report = {.kind = "exit", .code = code, .signal = sig};
	(void)send_report(CONTROL_FD, &exit_report, NULL, 0);
	return code;
}
