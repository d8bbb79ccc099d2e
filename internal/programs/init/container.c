/*
 * The helper's container role (argv[0] "jail:container"): an OCI container
 * made from a bundle that `jail oci create` read, checked and translated
 * (package oci, config.Container, docs/oci.md §2). Included by init.c, whose
 * protocol, failure and path-in-root helpers it uses.
 *
 * The order is the security argument, top to bottom in container_main:
 *  1. join the namespaces given by path, a user namespace first;
 *  2. make the new ones; a new user namespace is mapped by the supervisor
 *     (userns, mapped) before anything needs its ids;
 *  3. fork the container's init into the new or joined pid namespace; the
 *     role reports its pid (child) and ends, so the init is reparented to
 *     jail oci create, a subreaper, and to the shim after it;
 *  4. the init builds the root: every host object opened first, every
 *     destination resolved inside the root, the root pivoted to, masked and
 *     read-only paths last;
 *  5. it reports created and waits on the exec FIFO, which only the state
 *     directory's owner can open;
 *  6. once started: the caller's preserved descriptors moved to 3, 4, ...,
 *     rlimits, groups and ids, capabilities, no_new_privs,
 *     the bundle's filter, the working directory, execve (oom_score_adj is
 *     jail oci create's to set, through the host's /proc, once the role
 *     reports this process: it has the privilege to lower it and says so
 *     when it cannot).
 * Nothing of the container runs before 6, and the role keeps no descriptor
 * of the host past its exec but stdio and those its caller preserved (all
 * others are close-on-exec).
 */

#include <linux/magic.h> /* PROC_SUPER_MAGIC, DEVPTS_SUPER_MAGIC */
#include <linux/stat.h>  /* struct statx: musl 1.2.3 has no statx() */

/* join_namespaces joins c's namespaces, those of type only_user or not. */
static int join_namespaces(const struct container *c, bool user, struct failure *f)
{
	for (size_t i = 0; i < c->njoin; i++) {
		const struct joined_namespace *j = &c->join[i];
		if ((j->type == CLONE_NEWUSER) != user)
			continue;
		if (setns(j->fd, (int)j->type) != 0) {
			char prefix[64];
			message(prefix, sizeof(prefix), "setns %#llx", (unsigned long long)j->type);
			return fail_errno(f, "join namespace", prefix);
		}
		close(j->fd);
	}
	return 0;
}

/* become_root makes the role root of the user namespace it made or
 * joined: its ids were the host's, which that namespace may not map. */
static int become_root(struct failure *f)
{
	if (syscall(SYS_setresgid, 0, 0, 0) != 0)
		return fail_errno(f, "user namespace", "setresgid 0");
	if (syscall(SYS_setresuid, 0, 0, 0) != 0)
		return fail_errno(f, "user namespace", "setresuid 0");
	return 0;
}

/* clone_mount attaches a detached clone of src (recursive when rec) on
 * target, with attrs set while it is detached. */
static int clone_mount(int src, int target, uint64_t attrs, bool rec, const char **what)
{
	return attach(src, "", target, attrs, rec, what);
}

/* mount_attrs are the MS_* flags mount_setattr sets on a bind's clone. */
static uint64_t mount_attrs(uint64_t flags)
{
	uint64_t a = 0;
	if (flags & MS_RDONLY)
		a |= MOUNT_ATTR_RDONLY;
	if (flags & MS_NOSUID)
		a |= MOUNT_ATTR_NOSUID;
	if (flags & MS_NODEV)
		a |= MOUNT_ATTR_NODEV;
	if (flags & MS_NOEXEC)
		a |= MOUNT_ATTR_NOEXEC;
	/* The atime flags are not set: mount_setattr takes them only as a
	 * whole (MOUNT_ATTR__ATIME), and a bind keeps its source's. */
	if (flags & MS_NODIRATIME)
		a |= MOUNT_ATTR_NODIRATIME;
	return a;
}

/* cgroup2_over mounts a fresh cgroup2, the caller's cgroup namespace's root
 * with the MS_* flags' attributes, over the cgroup2 mount at target, where
 * mount(2) refuses one (EBUSY: the same filesystem on the same mount point)
 * whatever root either shows. That one is not kept: a bind of the host's
 * /sys brings the host's, whose tree is above a cgroup namespace's root
 * and shows every cgroup of the host. move_mount attaches the new one. */
static int cgroup2_over(int target, const char *source, uint64_t flags, const char **what)
{
	int fs = (int)syscall(SYS_fsopen, "cgroup2", FSOPEN_CLOEXEC);
	if (fs < 0) {
		*what = "fsopen";
		return -1;
	}
	int mnt = -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", source, 0) != 0)
		*what = "fsconfig source";
	else if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0)
		*what = "fsconfig";
	else if ((mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, (unsigned)mount_attrs(flags))) < 0)
		*what = "fsmount";
	int saved = errno;
	close(fs);
	if (mnt < 0) {
		errno = saved;
		return -1;
	}
	int err = move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	saved = errno;
	close(mnt);
	errno = saved;
	if (err != 0)
		*what = "move_mount";
	return err;
}

/* propagate sets the MS_* propagation prop on the mount at dest (absolute,
 * inside the current root). */
static int propagate(int root, const char *dest, uint64_t prop)
{
	if (prop == 0)
		return 0;
	int top = open_in_root(root, dest);
	if (top < 0)
		return -1;
	char path[64];
	int err = format(path, sizeof(path), "/proc/self/fd/%d", top);
	if (err == 0)
		err = mount(NULL, path, NULL, (unsigned long)prop, NULL);
	int saved = errno;
	close(top);
	errno = saved;
	return err;
}

/* container_mounts mounts c's mounts in order on the root at b->root.
 * Bind sources, host paths, are opened before anything is mounted. */
static int container_mounts(const struct container *c, struct builder *b)
{
	int *sources = xcalloc(c->nmounts, sizeof(int));
	for (size_t i = 0; i < c->nmounts; i++) {
		sources[i] = -1;
		const struct container_mount *m = &c->mounts[i];
		if (!(m->flags & MS_BIND))
			continue;
		/* Canonical, from the supervisor; no symlink followed now, and
		 * the file it opened, not another put at that path since (a
		 * directory of the path renamed and replaced). */
		char why[PATH_MAX + 256];
		sources[i] = open_verified(m->source, m->source_dev, m->source_ino, why, sizeof(why));
		if (sources[i] < 0) {
			char step[PATH_MAX + 32];
			message(step, sizeof(step), "open mount source %s", m->source);
			return fail(b->f, step, "%s", why);
		}
	}
	for (size_t i = 0; i < c->nmounts; i++) {
		const struct container_mount *m = &c->mounts[i];
		char step[PATH_MAX + 16];
		message(step, sizeof(step), "mount %s", m->destination);
		bool dir = true;
		if (sources[i] >= 0) {
			struct stat st;
			if (fstat(sources[i], &st) != 0)
				return fail_errno(b->f, step, NULL);
			dir = S_ISDIR(st.st_mode);
		}
		int target = dir ? root_dir(b, m->destination) : root_file(b, m->destination);
		if (target < 0)
			return fail_errno(b->f, step, "create mountpoint");
		/* A destination the bundle does not place in /proc that the
		 * root's symlinks lead into procfs would cover /proc or its
		 * files with other content: the masks, read-only paths and the
		 * exec FIFO's /proc/self/fd would then resolve into it. */
		struct statfs dest_fs;
		if (strcmp(m->destination, "/proc") != 0 && strncmp(m->destination, "/proc/", 6) != 0 &&
		    (fstatfs(target, &dest_fs) != 0 || dest_fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */)) {
			close(target);
			return fail(b->f, step, "the destination leads into /proc (a symlink in the root filesystem?): refused");
		}
		int err = 0;
		const char *what = "mount";
		if (sources[i] >= 0) {
			err = clone_mount(sources[i], target, mount_attrs(m->flags), (m->flags & MS_REC) != 0, &what);
			close(sources[i]);
		} else {
			unsigned long flags = (unsigned long)(m->flags & ~(uint64_t)(MS_BIND | MS_REC));
			err = mount_at(m->source[0] != '\0' ? m->source : m->type, target, m->type, flags, m->data[0] != '\0' ? m->data : NULL);
			/* EBUSY: a cgroup2 mount is at the destination already
			 * (a bind of the host's /sys brought the host's): a
			 * fresh one goes over it, when the mount has no options
			 * (which the new mount API would take one by one). */
			struct statfs there;
			if (err != 0 && errno == EBUSY && strcmp(m->type, "cgroup2") == 0 && m->data[0] == '\0' &&
			    fstatfs(target, &there) == 0 && there.f_type == CGROUP2_SUPER_MAGIC)
				err = cgroup2_over(target, m->source[0] != '\0' ? m->source : m->type, m->flags, &what);
		}
		close(target);
		if (err != 0)
			return fail_errno(b->f, step, what);
		if (propagate(b->root, m->destination, m->propagation) != 0)
			return fail_errno(b->f, step, "propagation");
	}
	free(sources);
	return 0;
}

/* container_devices makes c's device nodes; in a user namespace, where
 * mknod is refused, the host's node of that path is bound instead. */
static int container_devices(const struct container *c, struct builder *b, bool in_userns)
{
	for (size_t i = 0; i < c->ndevices; i++) {
		const struct container_device *d = &c->devices[i];
		char step[PATH_MAX + 16];
		message(step, sizeof(step), "device %s", d->path);
		mode_t type = d->type[0] == 'b' ? S_IFBLK : d->type[0] == 'p' ? S_IFIFO : S_IFCHR;
		const char *slash = strrchr(d->path, '/');
		if (slash == NULL || slash[1] == '\0')
			return fail(b->f, step, "not an absolute path to a file");
		char parent[PATH_MAX];
		if (format(parent, sizeof(parent), "%.*s", (int)(slash - d->path), d->path) != 0)
			return fail(b->f, step, "path too long");
		int dir = mkdir_all_in_root(b->root, parent[0] == '\0' ? "/" : parent);
		if (dir < 0)
			return fail_errno(b->f, step, "create parent");
		const char *name = slash + 1;
		int err;
		if (!in_userns || type == S_IFIFO) {
			(void)unlinkat(dir, name, 0);
			err = mknodat(dir, name, type | (d->mode & 07777), makedev((unsigned)d->major, (unsigned)d->minor));
			/* Owner and mode (as given, not as the umask left it) go
			 * through a handle of the node just made, checked to be it:
			 * the root's directory may be another user's, who could put
			 * a link to a host file in its place meanwhile. */
			int node = err == 0 ? openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
			struct stat ns;
			if (err == 0 && (node < 0 || fstat(node, &ns) != 0 || (ns.st_mode & S_IFMT) != type ||
					 (type != S_IFIFO && ns.st_rdev != makedev((unsigned)d->major, (unsigned)d->minor)))) {
				if (node >= 0)
					close(node);
				close(dir);
				return fail(b->f, step, "the node made was replaced");
			}
			char by_fd[64];
			if (err == 0 && format(by_fd, sizeof(by_fd), "/proc/self/fd/%d", node) != 0)
				err = -1;
			if (err == 0)
				err = fchownat(node, "", d->uid, d->gid, AT_EMPTY_PATH);
			if (err == 0)
				err = chmod(by_fd, d->mode & 07777);
			if (node >= 0) {
				int saved = errno;
				close(node);
				errno = saved;
			}
		} else {
			int host = open(d->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			struct stat st;
			if (host < 0 || fstat(host, &st) != 0 || (st.st_mode & S_IFMT) != type ||
			    major(st.st_rdev) != (unsigned)d->major || minor(st.st_rdev) != (unsigned)d->minor) {
				if (host >= 0)
					close(host);
				close(dir);
				return fail(b->f, step, "in a user namespace the host's %s must be that device to be bound", d->path);
			}
			int fd = openat(dir, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd >= 0)
				close(fd);
			int target = open_in_root(dir, name);
			const char *what = "";
			err = target < 0 ? -1 : clone_mount(host, target, 0, false, &what);
			if (target >= 0)
				close(target);
			close(host);
		}
		int saved = errno;
		close(dir);
		errno = saved;
		if (err != 0)
			return fail_errno(b->f, step, NULL);
	}
	return 0;
}

/* dev_links makes /dev's standard links, where the root has a /dev and
 * not already the names. */
static void dev_links(int root)
{
	static const char *const links[][2] = {
		{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
		{"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"},
	};
	int dev = open_in_root(root, "/dev");
	if (dev < 0)
		return;
	int real = openat(dev, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dev);
	if (real < 0)
		return;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		(void)symlinkat(links[i][0], real, links[i][1]);
	close(real);
}

/* mask_path hides path (absolute, in the current root): a directory under
 * an empty read-only tmpfs, anything else under /dev/null. A path the root
 * lacks is skipped. */
static int mask_path(int root, const char *path, struct failure *f)
{
	char step[PATH_MAX + 16];
	message(step, sizeof(step), "mask %s", path);
	int target = open_in_root(root, path);
	if (target < 0)
		return errno == ENOENT ? 0 : fail_errno(f, step, NULL);
	struct stat st;
	int err = fstat(target, &st);
	if (err == 0 && S_ISDIR(st.st_mode)) {
		err = mount_at("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555");
	} else if (err == 0) {
		/* The container's /dev/null, which must be that device: one the
		 * root's owner swapped for a link to a file of the kernel's
		 * would be bound in its place (CVE-2025-31133). */
		int null = open_in_root(root, "/dev/null");
		struct stat ns;
		if (null >= 0 && (fstat(null, &ns) != 0 || !S_ISCHR(ns.st_mode) || major(ns.st_rdev) != 1 || minor(ns.st_rdev) != 3)) {
			close(null);
			close(target);
			return fail(f, step, "/dev/null in the container is not the character device 1:3");
		}
		const char *what = "";
		err = null < 0 ? -1 : clone_mount(null, target, MOUNT_ATTR_RDONLY, false, &what);
		if (null >= 0)
			close(null);
	}
	int saved = errno;
	close(target);
	errno = saved;
	return err != 0 ? fail_errno(f, step, NULL) : 0;
}

/* read_only_path makes the tree at path (in the current root) read-only:
 * a recursive clone of it, read-only, over itself. */
static int read_only_path(int root, const char *path, struct failure *f)
{
	char step[PATH_MAX + 16];
	message(step, sizeof(step), "read-only %s", path);
	int target = open_in_root(root, path);
	if (target < 0)
		return errno == ENOENT ? 0 : fail_errno(f, step, NULL);
	const char *what = "";
	int err = clone_mount(target, target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, &what);
	int saved = errno;
	close(target);
	errno = saved;
	return err != 0 ? fail_errno(f, step, what) : 0;
}

/* write_sysctls writes c's kernel parameters under /proc/sys. */
static int write_sysctls(const struct container *c, struct failure *f)
{
	for (size_t i = 0; i < c->nsysctl; i++) {
		char path[PATH_MAX], step[PATH_MAX + 16];
		message(step, sizeof(step), "sysctl %s", c->sysctl[i].key);
		if (format(path, sizeof(path), "/proc/sys/%s", c->sysctl[i].key) != 0)
			return fail(f, step, "name too long");
		for (char *p = path + strlen("/proc/sys/"); *p != '\0'; p++)
			if (*p == '.')
				*p = '/';
		/* Resolved in the container's root, and only procfs's own files:
		 * the root's owner cannot lead the write elsewhere. */
		struct open_how how = {.flags = O_WRONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
		if (fd < 0)
			return fail_errno(f, step, NULL);
		struct statfs sf;
		if (fstatfs(fd, &sf) != 0 || sf.f_type != 0x9fa0 /* PROC_SUPER_MAGIC */) {
			close(fd);
			return fail(f, step, "%s is not procfs's", path);
		}
		int err = write_all(fd, (const unsigned char *)c->sysctl[i].value, strlen(c->sysctl[i].value));
		int saved = errno;
		close(fd);
		errno = saved;
		if (err != 0)
			return fail_errno(f, step, NULL);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The hooks the init runs: createContainer and startContainer        */
/* ------------------------------------------------------------------ */

/* The same numbers on every architecture. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

enum {
	/* At most this many hooks of each kind (oci.MaxContainerHooks). */
	MAX_CONTAINER_HOOKS = 64,
	/* At most this many descriptors preserved (oci.MaxPreservedFDs). */
	MAX_PRESERVED_FDS = 32,
	/* A failed hook's error quotes this much of its output. */
	HOOK_OUTPUT = 256,
	/* What is read of its output once it has ended: a process it left
	 * behind may hold the pipe and go on writing. */
	HOOK_OUTPUT_AFTER = 64 * 1024,
};

/* hook_output keeps the first HOOK_OUTPUT - 1 bytes read of a hook's
 * output and reads (and drops) what follows. */
struct hook_output {
	char text[HOOK_OUTPUT];
	size_t len;
};

/* drain_output reads what fd (non-blocking) has, at most limit bytes
 * (0: no limit), into o; it returns 1 at its end (EOF or an error), 0 when
 * nothing more is to be read now. */
static int drain_output(int fd, struct hook_output *o, size_t limit)
{
	char buf[4096];
	size_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return 1;
		size_t keep = sizeof(o->text) - 1 - o->len;
		if (keep > (size_t)n)
			keep = (size_t)n;
		memcpy(o->text + o->len, buf, keep);
		o->len += keep;
		o->text[o->len] = '\0';
		total += (size_t)n;
		if (limit != 0 && total >= limit)
			return 1;
	}
}

/* one_line makes s one line of printable bytes, trimmed. */
static void one_line(char *s)
{
	for (char *p = s; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
			*p = ' ';
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == ' ')
		s[--n] = '\0';
	size_t lead = strspn(s, " ");
	memmove(s, s + lead, n - lead + 1);
}

/* hook_child is the hook's process, forked by the init: stdin the state,
 * stdout and stderr the pipe the init reads, no other descriptor, signals
 * unblocked, dead with the init, in dir when it is not -1; then the hook. */
static _Noreturn void hook_child(const struct container_hook *h, pid_t parent, int state, int out, int dir)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
		_exit(127);
	if (dup2(state, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	if (dir >= 0 && fchdir(dir) != 0) {
		dprintf(2, "chdir: %s", strerror(errno));
		_exit(127);
	}
	/* Nothing of the init's reaches the hook: not the control socket,
	 * not the root's or the exec FIFO's descriptor. */
	if (close_range(3, ~0U, 0) != 0)
		_exit(127);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char *path_only[] = {h->path, NULL};
	execve(h->path, h->nargs > 0 ? h->args : path_only, h->env);
	char text[128];
	dprintf(2, "exec: %s", errtext(errno, text, sizeof(text)));
	_exit(127);
}

/* run_hook runs hook h (the index-th of kind) as a child of this process,
 * in its namespaces and with its credentials, with state on its stdin, and
 * waits for it, killing it once its timeout has passed, or once the peer
 * of control (-1: none) hangs up: jail oci create, ended (the shim's
 * timeout) before it recorded the container, which delete could then not
 * find. A hook that does not end with status 0 fails f with one line
 * naming it. Processes the hook leaves behind are left (as runc leaves
 * them): they are in the container's cgroup and namespaces, which delete
 * ends. */
static int run_hook(const char *kind, size_t index, const struct container_hook *h, const struct wire_bytes *state, int dir,
		    int control, struct failure *f)
{
	char step[PATH_MAX + 64];
	message(step, sizeof(step), "%s hook #%zu (%s)", kind, index, h->path);
	int in = memfd_create("jail-hook-state", MFD_CLOEXEC);
	if (in < 0)
		return fail_errno(f, step, "state");
	if ((state->len > 0 && write_all(in, state->data, state->len) != 0) || lseek(in, 0, SEEK_SET) != 0) {
		close(in);
		return fail_errno(f, step, "state");
	}
	int out[2];
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in);
		return fail_errno(f, step, "pipe");
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int saved = errno;
		close(in), close(out[0]), close(out[1]);
		errno = saved;
		return fail_errno(f, step, "fork");
	}
	if (pid == 0)
		hook_child(h, parent, in, out[1], dir);
	close(in);
	close(out[1]);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 || fcntl(out[0], F_SETFL, O_NONBLOCK) != 0) {
		int saved = errno;
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		close(out[0]);
		errno = saved;
		return fail_errno(f, step, "pidfd");
	}
	int64_t deadline = h->timeout > 0 ? now() + (int64_t)h->timeout * 1000000000 : 0;
	struct hook_output o = {.len = 0};
	bool ended = false, reading = true, timed_out = false, abandoned = false;
	while (!ended) {
		int wait_ms = -1;
		if (deadline != 0) {
			int64_t left = deadline - now();
			if (left <= 0) {
				timed_out = true;
				break;
			}
			left = left / 1000000 + 1;
			wait_ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		struct pollfd p[3] = {
			{.fd = pidfd, .events = POLLIN}, {.fd = reading ? out[0] : -1, .events = POLLIN}, {.fd = control, .events = POLLRDHUP}};
		if (poll(p, 3, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			timed_out = true; /* cannot wait: ended as at a timeout */
			break;
		}
		if (reading && p[1].revents != 0 && drain_output(out[0], &o, 0) != 0)
			reading = false;
		if (p[0].revents != 0)
			ended = true;
		else if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			abandoned = true;
			break;
		}
	}
	if (timed_out || abandoned)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (reading)
		(void)drain_output(out[0], &o, HOOK_OUTPUT_AFTER);
	close(pidfd);
	close(out[0]);
	if (timed_out)
		return fail(f, step, "timed out after %ds", h->timeout);
	if (abandoned)
		return fail(f, step, "jail oci create ended");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	char how[64];
	if (WIFEXITED(status))
		message(how, sizeof(how), "exit status %d", WEXITSTATUS(status));
	else
		message(how, sizeof(how), "killed by signal %d", WTERMSIG(status));
	one_line(o.text);
	if (o.text[0] != '\0')
		return fail(f, step, "%s: %s%s", how, o.text, o.len == sizeof(o.text) - 1 ? "..." : "");
	return fail(f, step, "%s", how);
}

/* run_hooks runs the n hooks of kind in order; the first that fails
 * fails them all. */
static int run_hooks(const char *kind, const struct container_hook *hooks, size_t n, const struct wire_bytes *state, int dir,
		     int control, struct failure *f)
{
	for (size_t i = 0; i < n; i++)
		if (run_hook(kind, i, &hooks[i], state, dir, control, f) != 0)
			return -1;
	return 0;
}

/* has_hooks: c has hooks for its init to run, which then waits for the
 * state (KindState) before it pivots. */
static bool has_hooks(const struct container *c)
{
	return c->ncreate_container_hooks > 0 || c->nstart_container_hooks > 0;
}

/* await_state receives the state the hooks get, which jail oci create
 * sends once the prestart and createRuntime hooks have run. */
static int await_state(struct wire_bytes *state, struct failure *f)
{
	struct message m;
	if (recv_message(CONTROL_FD, &m) != 0)
		return fail(f, "hooks", "no state from jail oci create");
	for (int i = 0; i < m.nfds; i++)
		close(m.fds[i]);
	if (strcmp(m.body.kind, "state") != 0 || !m.body.state.present)
		return fail(f, "hooks", "expected the state, not %s", m.body.kind);
	*state = m.body.state; /* kept for the startContainer hooks */
	return 0;
}

/* unescape_octal undoes mountinfo's \ooo escapes in place. */
static void unescape_octal(char *s)
{
	char *out = s;
	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* private_parent makes private (alone, not its children) the mount dir
 * lies on, found by its mount id in mountinfo: pivot_root refuses a new
 * root whose parent mount is shared, as it is with rootfsPropagation
 * shared (runc does the same). */
static int private_parent(int dir)
{
	struct statx stx;
	if (syscall(SYS_statx, dir, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID))
		return -1;
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	if (mi == NULL)
		return -1;
	char line[3 * PATH_MAX];
	int err = -1;
	errno = ENOENT;
	while (fgets(line, sizeof(line), mi) != NULL) {
		unsigned long long id;
		char point[PATH_MAX];
		if (sscanf(line, "%llu %*u %*s %*s %4095s", &id, point) != 2 || id != stx.stx_mnt_id)
			continue;
		unescape_octal(point);
		err = mount(NULL, point, NULL, MS_PRIVATE, NULL);
		break;
	}
	fclose(mi);
	return err;
}

/* container_root builds the container's root and pivots into it. With
 * hooks, it waits for their state (into state) before it pivots, and runs
 * the createContainer hooks there: in the container's namespaces, in the
 * tree jail oci create sees with the container's mounts made, in the
 * root's directory, with all of the init's privileges (as runc's init
 * runs them). */
static int container_root(const struct container *c, bool in_userns, struct wire_bytes *state, struct failure *f)
{
	uint64_t prop = c->root_propagation != 0 ? c->root_propagation : (uint64_t)(MS_SLAVE | MS_REC);
	/* An unbindable tree cannot be cloned into the root: it is built
	 * private (no event reaches the host either way), and the new root
	 * made unbindable once pivoted into. */
	uint64_t build_prop = (prop & MS_UNBINDABLE) ? (uint64_t)(MS_PRIVATE | MS_REC) : prop;
	if (mount("", "/", "", (unsigned long)build_prop, NULL) != 0)
		return fail_errno(f, "root propagation", NULL);
	char why[PATH_MAX + 256];
	int rootfs = open_verified(c->rootfs, c->rootfs_dev, c->rootfs_ino, why, sizeof(why));
	if (rootfs < 0)
		return fail(f, "open root", "%s", why);
	if ((prop & MS_SHARED) && (private_parent(rootfs) != 0 || mount(NULL, "/", NULL, MS_PRIVATE, NULL) != 0))
		return fail_errno(f, "root propagation", "make the root's parent private");
	/* The root, a mount of its own (pivot_root needs one): the clone's
	 * descriptor names the attached mount from here on. */
	int root = open_tree(rootfs, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (root < 0 || move_mount(root, "", rootfs, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
		return fail_errno(f, "mount root", NULL);
	close(rootfs);
	struct builder b = {.f = f, .root = root};
	if (container_mounts(c, &b) != 0 || container_devices(c, &b, in_userns) != 0)
		return -1;
	dev_links(root);
	if (has_hooks(c) && (await_state(state, f) != 0 ||
			     run_hooks("createContainer", c->create_container_hooks, c->ncreate_container_hooks, state, root,
					       CONTROL_FD, f) != 0))
		return -1;
	if (pivot(root) != 0)
		return fail_errno(f, "pivot_root", NULL);
	close(root);
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return fail_errno(f, "open new root", NULL);
	/* The new root is a clone of its own: as asked, it is made unbindable,
	 * or shared (a peer group of the container's when the rootfs's host
	 * mount is private, so that binds of / inside see later mounts). */
	if ((prop & (MS_UNBINDABLE | MS_SHARED)) && mount("", "/", "", (unsigned long)prop, NULL) != 0)
		return fail_errno(f, "root propagation", "of the new root");
	/* runc's order: names and sysctls while /proc/sys can be written,
	 * then read-only paths, masks, and the root read-only last. */
	/* An empty name is none given: the namespace keeps the host's, as
	 * runc leaves it. */
	if (c->set_hostname && c->hostname[0] != '\0') {
		if (sethostname(c->hostname, strlen(c->hostname)) != 0)
			return fail_errno(f, "hostname", NULL);
	}
	if (c->set_hostname && c->domainname[0] != '\0' && setdomainname(c->domainname, strlen(c->domainname)) != 0)
		return fail_errno(f, "domainname", NULL);
	if (write_sysctls(c, f) != 0)
		return -1;
	for (size_t i = 0; i < c->nreadonly_paths; i++)
		if (read_only_path(root, c->readonly_paths[i], f) != 0)
			return -1;
	for (size_t i = 0; i < c->nmasked_paths; i++)
		if (mask_path(root, c->masked_paths[i], f) != 0)
			return -1;
	if (c->rootfs_read_only) {
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
		if (mount_setattr(root, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0)
			return fail_errno(f, "read-only root", NULL);
	}
	close(root);
	return 0;
}

/* container_bounding drops what the bounding set does not keep: before
 * the ids change, while the process has CAP_SETPCAP. */
static int container_bounding(const struct container_process *p, struct failure *f)
{
	int last = last_cap();
	for (int c = 0; c <= last; c++)
		if ((c >= 64 || (p->bounding & ((uint64_t)1 << c)) == 0) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			return fail_errno(f, "capabilities", "bounding set");
	return 0;
}

/* container_caps sets the process's other four capability sets, after
 * its ids changed with PR_SET_KEEPCAPS (which kept the permitted set). */
static int container_caps(const struct container_process *p, struct failure *f)
{
	int last = last_cap();
	/* Capabilities this kernel does not have are none to set (runc
	 * ignores them too); asking for them would fail the capset. */
	uint64_t known = last >= 63 ? ~(uint64_t)0 : ((uint64_t)1 << (last + 1)) - 1;
	uint64_t e = p->effective & known, pm = p->permitted & known, in = p->inheritable & known;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {
		{.effective = (uint32_t)e, .permitted = (uint32_t)pm, .inheritable = (uint32_t)in},
		{.effective = (uint32_t)(e >> 32), .permitted = (uint32_t)(pm >> 32), .inheritable = (uint32_t)(in >> 32)},
	};
	if (syscall(SYS_capset, &hdr, data) != 0)
		return fail_errno(f, "capabilities", "capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		return fail_errno(f, "capabilities", "ambient set");
	/* An ambient capability needs to be permitted and inheritable too;
	 * one that is not is left out, as runc leaves it (with a warning),
	 * since bundles commonly ask for ambient ones alone. */
	for (int c = 0; c <= last && c < 64; c++)
		if ((p->ambient & ((uint64_t)1 << c)) != 0)
			(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0);
	return 0;
}

/* container_filter loads the jail profile's filter the bundle asked for,
 * then the bundle's own (the kernel runs every program loaded and takes
 * the strictest verdict, whatever the order). The profile's goes first:
 * once the bundle's is loaded, it judges the seccomp(2) calls that load
 * the rest, and one that answers them with errno 0 ("success", nothing
 * loaded) would leave the process without the profile's. */
static int container_filter(const struct container *c, struct failure *f)
{
	const struct wire_bytes *programs[] = {
		&c->profile_seccomp.allowlist, &c->profile_seccomp.denials, &c->profile_seccomp.guard,
		&c->seccomp.allowlist, &c->seccomp.denials, &c->seccomp.guard,
	};
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
		if (!programs[i]->present)
			continue;
		if (!valid_program(programs[i]))
			return fail(f, "seccomp", "a malformed program");
		struct sock_fprog prog = {.len = (unsigned short)(programs[i]->len / 8), .filter = (struct sock_filter *)programs[i]->data};
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
			return fail_errno(f, "seccomp", NULL);
	}
	return 0;
}

/* container_pty allocates the process's terminal in the container's own
 * devpts: /dev/pts resolved in the current root without following any
 * link, checked to be a devpts root, its ptmx opened without crossing a
 * mount and checked again. The root's owner could otherwise put a FIFO, a
 * link or another device there, which the runtime, still privileged,
 * would open, and whose descriptor the console socket's reader (the
 * shim) would be handed as the terminal. */
static int container_pty(int *master, int *tty, struct failure *f)
{
	*master = *tty = -1;
	struct open_how dir_how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				   .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int pts = (int)syscall(SYS_openat2, AT_FDCWD, "/dev/pts", &dir_how, sizeof(dir_how));
	if (pts < 0)
		return fail_errno(f, "terminal", "open /dev/pts");
	struct statfs sf;
	struct stat st;
	if (fstatfs(pts, &sf) != 0 || sf.f_type != DEVPTS_SUPER_MAGIC || fstat(pts, &st) != 0 || st.st_ino != 1) {
		close(pts);
		return fail(f, "terminal", "/dev/pts in the container is not a devpts mount");
	}
	struct open_how how = {.flags = O_RDWR | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	*master = (int)syscall(SYS_openat2, pts, "ptmx", &how, sizeof(how));
	close(pts);
	if (*master < 0)
		return fail_errno(f, "terminal", "open /dev/pts/ptmx");
	if (fstatfs(*master, &sf) != 0 || sf.f_type != DEVPTS_SUPER_MAGIC || fstat(*master, &st) != 0 || !S_ISCHR(st.st_mode) ||
	    major(st.st_rdev) != 5 || minor(st.st_rdev) != 2) {
		close(*master);
		*master = -1;
		return fail(f, "terminal", "/dev/pts/ptmx in the container is not devpts's ptmx");
	}
	int unlock = 0;
	if (ioctl(*master, TIOCSPTLCK, &unlock) != 0)
		return fail_errno(f, "terminal", "unlock pty");
	/* The peer through the master itself, not by a path. */
	*tty = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*tty < 0)
		return fail_errno(f, "terminal", "open pty peer");
	return 0;
}

/* container_oom_score_adj sets the enter role's oom_score_adj (a created
 * container's is set by jail oci create), inherited by what it forks and
 * across its exec. It is called while /proc is the host's (before the
 * container's mount namespace is joined): the container's /proc is the root's owner's to
 * arrange (without a proc mount, /proc/self could be a link to another
 * file, or into a host /proc bound into the root), and the write, by a
 * process that may still lower the value, must reach this process's own
 * file. The file is checked to be procfs's all the same. */
static int container_oom_score_adj(const struct container_process *p, struct failure *f)
{
	if (!p->set_oom_score_adj)
		return 0;
	struct open_how how = {.flags = O_WRONLY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/proc/self/oom_score_adj", &how, sizeof(how));
	if (fd < 0)
		return fail_errno(f, "oom_score_adj", NULL);
	struct statfs sf;
	char value[16];
	if (fstatfs(fd, &sf) != 0 || sf.f_type != PROC_SUPER_MAGIC) {
		close(fd);
		return fail(f, "oom_score_adj", "/proc/self/oom_score_adj is not procfs's");
	}
	int err = format(value, sizeof(value), "%d", p->oom_score_adj);
	if (err == 0)
		err = write_all(fd, (const unsigned char *)value, strlen(value));
	int saved = errno;
	close(fd);
	errno = saved;
	return err != 0 ? fail_errno(f, "oom_score_adj", NULL) : 0;
}

/* apparmor_open opens the attr file through which the process asks to be
 * executed under the bundle's AppArmor profile ("exec NAME" to its own
 * attr/apparmor/exec, attr/exec before Linux 5.8: the kernel applies it
 * at the next execve, and a fork inherits it), or leaves *fd at -1 when
 * there is no profile. It is opened while /proc is the host's, before the
 * bundle's mounts (or the enter role's setns): the container's /proc is
 * its mounts' (the bundle's, its image's symlinks, or in a running
 * container its processes'), and a procfs file that takes any write (a
 * sysctl, /proc/self/sched) bound or linked there passes the procfs check
 * below and would leave the process unconfined. The file is checked to be
 * procfs's all the same; the kernel refuses a write to another task's
 * attr. */
static int apparmor_open(const struct container_process *p, int *fd, struct failure *f)
{
	*fd = -1;
	if (p->apparmor_profile == NULL || p->apparmor_profile[0] == '\0')
		return 0;
	static const char *const attrs[] = {"/proc/self/attr/apparmor/exec", "/proc/self/attr/exec"};
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]) && *fd < 0; i++) {
		struct open_how how = {.flags = O_WRONLY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
		*fd = (int)syscall(SYS_openat2, AT_FDCWD, attrs[i], &how, sizeof(how));
		if (*fd < 0 && errno != ENOENT)
			return fail_errno(f, "apparmor", attrs[i]);
	}
	if (*fd < 0)
		return fail(f, "apparmor", "this kernel has no attr/apparmor/exec or attr/exec in /proc/self");
	struct statfs sf;
	if (fstatfs(*fd, &sf) != 0 || sf.f_type != PROC_SUPER_MAGIC) {
		close(*fd);
		*fd = -1;
		return fail(f, "apparmor", "/proc/self/attr is not procfs's");
	}
	return 0;
}

/* apparmor_write makes the request through fd (apparmor_open's, closed
 * here; -1: none to make). A profile that is not loaded fails the write
 * (ENOENT). */
static int apparmor_write(int fd, const struct container_process *p, struct failure *f)
{
	if (fd < 0)
		return 0;
	char command[8 + 1024 + 1];
	int err = format(command, sizeof(command), "exec %s", p->apparmor_profile);
	if (err == 0) {
		/* One write: the kernel reads a command per write. */
		ssize_t n = write(fd, command, strlen(command));
		if (n < 0)
			err = -1;
		else if ((size_t)n != strlen(command)) {
			errno = EIO;
			err = -1;
		}
	}
	int saved = errno;
	close(fd);
	errno = saved;
	if (err != 0)
		return fail_errno(f, "apparmor", p->apparmor_profile);
	return 0;
}

/* preserve_fds gives the process the caller's preserved descriptors
 * (--preserve-fds) as 3, 4, ..., open across its exec, as runc does.
 * *fifo (the exec FIFO, still to be written) is first moved above that
 * range when it is in it. The role's message brought them in order, each
 * above its place (after the control socket and what came before them),
 * and then each is moved down onto its place in turn: no dup2 overwrites
 * one still to be moved, and no descriptor beyond those received is
 * needed, so the caller's RLIMIT_NOFILE that let the role receive them
 * lets them be placed. Otherwise each is first copied above the range.
 * What they came on is closed: the process's RLIMIT_NOFILE, set next,
 * leaves the startContainer hooks only the numbers these would hold. The
 * FIFO's copy is close-on-exec, as every other descriptor of the init is.
 * Done before the filters are loaded, which may deny what it calls. */
static int preserve_fds(const struct container *c, int *fifo, struct failure *f)
{
	size_t n = c->npreserved_fds;
	if (n == 0)
		return 0;
	if (n > MAX_PRESERVED_FDS)
		return fail(f, "preserve-fds", "%zu descriptors, at most %d", n, MAX_PRESERVED_FDS);
	int above = 3 + (int)n;
	if (*fifo >= 0 && *fifo < above) {
		int moved = fcntl(*fifo, F_DUPFD_CLOEXEC, above);
		if (moved < 0)
			return fail_errno(f, "preserve-fds", "exec fifo");
		close(*fifo);
		*fifo = moved;
	}
	bool in_order = true;
	for (size_t i = 0; i < n; i++)
		if (c->preserved_fds[i] <= 3 + (int)i || (i > 0 && c->preserved_fds[i] <= c->preserved_fds[i - 1]))
			in_order = false;
	int from[MAX_PRESERVED_FDS];
	for (size_t i = 0; i < n; i++) {
		from[i] = in_order ? c->preserved_fds[i] : fcntl(c->preserved_fds[i], F_DUPFD_CLOEXEC, above);
		if (from[i] < 0)
			return fail_errno(f, "preserve-fds", "copy");
	}
	if (!in_order)
		for (size_t i = 0; i < n; i++)
			close(c->preserved_fds[i]);
	for (size_t i = 0; i < n; i++) {
		/* dup2 leaves the new descriptor open across exec. from[i] is
		 * above 3 + i, and any later one above from[i]. */
		if (dup2(from[i], 3 + (int)i) < 0)
			return fail_errno(f, "preserve-fds", "dup2");
		close(from[i]);
	}
	return 0;
}

/* container_process turns the init into the bundle's process: called once
 * `jail oci start` opened the exec FIFO. It returns only on failure. With
 * startContainer hooks, *fifo is the exec FIFO, whose byte is not written
 * yet: the hooks run right before the exec, as the process (its ids,
 * capabilities and filters, in its root and working directory, as runc
 * runs them), and the byte is written once they all succeeded, so that
 * `jail oci start` returns only then, and fails when one fails. */
static int container_process(const struct container *c, int tty, int *fifo, const struct wire_bytes *state, struct failure *f)
{
	const struct container_process *p = &c->process;
	if (tty >= 0) {
		if (ioctl(tty, TIOCSCTTY, 0) != 0)
			return fail_errno(f, "terminal", "TIOCSCTTY");
		/* The terminal is the process's user's, as runc makes it (the
		 * group is devpts's): a process that is not root must be able
		 * to reopen its own terminal (/dev/tty, ttyname). */
		struct stat st;
		if (fstat(tty, &st) != 0 || (st.st_uid != p->uid && fchown(tty, p->uid, (gid_t)-1) != 0))
			return fail_errno(f, "terminal", "chown");
		for (int i = 0; i < 3; i++)
			if (dup2(tty, i) < 0)
				return fail_errno(f, "terminal", "dup2");
		if (tty > 2)
			close(tty);
	}
	/* Before the rlimits: a lower RLIMIT_NOFILE must not keep the
	 * preserved descriptors from being moved. */
	if (preserve_fds(c, fifo, f) != 0)
		return -1;
	for (size_t i = 0; i < p->nrlimits; i++) {
		struct rlimit rl = {.rlim_cur = p->rlimits[i].soft, .rlim_max = p->rlimits[i].hard};
		if (setrlimit(p->rlimits[i].type, &rl) != 0)
			return fail_errno(f, "rlimits", NULL);
	}
	/* Without no_new_privs a filter needs CAP_SYS_ADMIN, which the
	 * process may be about to lose: loaded first then, as runc. */
	if (!p->no_new_privileges && container_filter(c, f) != 0)
		return -1;
	if (container_bounding(p, f) != 0)
		return -1;
	gid_t *groups = xcalloc(p->nadditional_gids, sizeof(gid_t));
	for (size_t i = 0; i < p->nadditional_gids; i++)
		groups[i] = p->additional_gids[i];
	if (syscall(SYS_setgroups, p->nadditional_gids, groups) != 0 && !(errno == EPERM && p->nadditional_gids == 0))
		return fail_errno(f, "user", "setgroups");
	free(groups);
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
		return fail_errno(f, "user", "keepcaps");
	if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) != 0)
		return fail_errno(f, "user", "setresgid");
	if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) != 0)
		return fail_errno(f, "user", "setresuid");
	if (container_caps(p, f) != 0)
		return -1;
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0)
		return fail_errno(f, "user", "keepcaps");
	if (p->no_new_privileges && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return fail_errno(f, "no_new_privs", NULL);
	if (p->set_umask)
		umask((mode_t)p->umask);
	if (chdir(p->cwd) != 0)
		return exec_failure(f, 126, "chdir %s: %s", p->cwd, strerror(errno));
	if (p->nargs == 0)
		return exec_failure(f, 127, "no process to run");
	const char *path = "";
	for (size_t i = 0; i < p->nenv; i++)
		if (strncmp(p->env[i], "PATH=", 5) == 0)
			path = p->env[i] + 5;
	char program[PATH_MAX];
	if (look_path(p->args[0], path, p->cwd, program, sizeof(program), f) != 0)
		return -1;
	if (p->no_new_privileges && container_filter(c, f) != 0)
		return -1;
	if (*fifo >= 0) {
		if (run_hooks("startContainer", c->start_container_hooks, c->nstart_container_hooks, state, -1, -1, f) != 0)
			return -1;
		if (write(*fifo, "0", 1) != 1)
			return fail_errno(f, "exec fifo", NULL);
		close(*fifo);
		*fifo = -1;
	}
	execve(program, p->args, p->env);
	return exec_failure(f, errno == ENOENT ? 127 : 126, "exec %s: %s", p->args[0], strerror(errno));
}

/* wait_gate waits for the role's report of this process (the gate's
 * EOF). */
static void wait_gate(int gate)
{
	char byte;
	while (read(gate, &byte, 1) < 0 && errno == EINTR)
		;
	close(gate);
}

/* container_init is the container's pid 1 until its exec: it builds the
 * root, reports created and waits for start. */
static _Noreturn void container_init(const struct container *c, int go, bool in_userns)
{
	struct failure f = {0};
	struct wire_bytes state = {0};
	wait_gate(go); /* the role's report of this pid goes first */
	if (setsid() < 0) {
		fail_errno(&f, "setsid", NULL);
		goto failed;
	}
	/* The AppArmor request's file, opened before the bundle's mounts;
	 * written once the root is built (what the init runs before, such
	 * as createContainer hooks, runs unconfined, as runc runs it) and
	 * before created: create fails on a profile not loaded, as runc's. */
	int apparmor = -1;
	if (apparmor_open(&c->process, &apparmor, &f) != 0)
		goto failed;
	if (container_root(c, in_userns, &state, &f) != 0)
		goto failed;
	if (apparmor_write(apparmor, &c->process, &f) != 0)
		goto failed;
	int master = -1, tty = -1;
	if (c->process.terminal && container_pty(&master, &tty, &f) != 0)
		goto failed;
	struct report created = {.kind = "created", .pid = 1};
	if (send_report(CONTROL_FD, &created, &master, master >= 0 ? 1 : 0) != 0)
		_exit(1);
	if (master >= 0)
		close(master);
	close(CONTROL_FD);
	/* Blocks until `jail oci start` opens the other end. */
	char fifo[64];
	if (format(fifo, sizeof(fifo), "/proc/self/fd/%d", c->exec_fifo_fd) != 0)
		_exit(1);
	int fd;
	do
		fd = open(fifo, O_WRONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		fprintf(stderr, "jail: oci: open exec fifo: %s\n", strerror(errno));
		_exit(1);
	}
	/* Through the container's /proc: it must be the FIFO it was given,
	 * not something the root's owner put at that path. */
	struct stat want, got;
	if (fstat(c->exec_fifo_fd, &want) != 0 || fstat(fd, &got) != 0 || !S_ISFIFO(got.st_mode) ||
	    want.st_dev != got.st_dev || want.st_ino != got.st_ino) {
		fputs("jail: oci: the exec fifo opened through the container's /proc is not the state directory's\n", stderr);
		_exit(1);
	}
	close(c->exec_fifo_fd);
	/* Without startContainer hooks the byte goes now; with them, once
	 * they have run (container_process). */
	if (c->nstart_container_hooks == 0) {
		if (write(fd, "0", 1) != 1)
			_exit(1);
		close(fd);
		fd = -1;
	}
	container_process(c, tty, &fd, &state, &f);
	char line[PIPE_BUF];
	message(line, sizeof(line), "jail: %s%s%s", f.exec_code != 0 ? "" : f.step, f.exec_code != 0 ? "" : ": ", f.reason);
	fprintf(stderr, "%s\n", line);
	/* Still unwritten: start is waiting, and is told why instead (at
	 * once, in one write of at most PIPE_BUF bytes). */
	if (fd >= 0) {
		line[0] = '!';
		memmove(line + 1, line + strlen("jail: "), strlen(line + strlen("jail: ")) + 1);
		(void)write(fd, line, strlen(line));
	}
	_exit(f.exec_code != 0 ? f.exec_code : 1);
failed:
	report_failure(CONTROL_FD, &f, 0);
	_exit(1);
}

/* attached_fds turns the description's descriptor numbers into the
 * files that came with the message: number N is the (N-4)th attached (fd 3
 * is the control socket), whatever number this process got it at. A number
 * naming no file attached is refused. */
static int attached_fds(struct container *c, const struct message *m, struct failure *f)
{
	int *fds[64 + 1 + MAX_PRESERVED_FDS];
	size_t n = 0;
	if (c->njoin >= 64)
		return fail(f, "container", "too many namespaces to join");
	if (c->npreserved_fds > MAX_PRESERVED_FDS)
		return fail(f, "preserve-fds", "%zu descriptors, at most %d", c->npreserved_fds, MAX_PRESERVED_FDS);
	for (size_t i = 0; i < c->njoin; i++)
		fds[n++] = &c->join[i].fd;
	if (c->exec_fifo_fd >= 0)
		fds[n++] = &c->exec_fifo_fd;
	for (size_t i = 0; i < c->npreserved_fds; i++)
		fds[n++] = &c->preserved_fds[i];
	for (size_t i = 0; i < n; i++) {
		int index = *fds[i] - (CONTROL_FD + 1);
		if (index < 0 || index >= m->nfds)
			return fail(f, "container", "descriptor %d is not among the %d attached", *fds[i], m->nfds);
		*fds[i] = m->fds[index];
	}
	return 0;
}

/* role_start is the start both roles share: no descriptor but stdio and
 * the control socket past an exec, its name, signals at their defaults,
 * not dumpable while it holds host objects (the exec of the process sets
 * what its own ids say), dead with jail oci until it forks, and its one
 * message, of kind, whose descriptor numbers become the files attached.
 * It returns the description, or NULL (f says why when it can be told). */
static struct container *role_start(const char *name, const char *kind, struct message *msg, struct failure *f)
{
	if (close_range(CONTROL_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		return NULL;
	prctl(PR_SET_NAME, name, 0, 0, 0);
	leave_signals_to_kernel();
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return NULL;
	if (recv_message(CONTROL_FD, msg) != 0 || strcmp(msg->kind, kind) != 0 || msg->body.container == NULL)
		return NULL;
	struct container *c = msg->body.container;
	if (attached_fds(c, msg, f) != 0) {
		report_failure(CONTROL_FD, f, 0);
		return NULL;
	}
	return c;
}

/* fork_reported forks the role's process (its parent-death signal left
 * behind), which waits until the role has reported its pid (child) before
 * it runs child_main; the role then ends. */
static int fork_reported(const struct container *c, bool in_userns, void (*child_main)(const struct container *, int, bool),
			 struct failure *f)
{
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) != 0)
		return fail_errno(f, "fork", "pipe");
	pid_t pid = fork();
	if (pid < 0)
		return fail_errno(f, "fork", NULL);
	if (pid == 0) {
		close(gate[1]);
		prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
		child_main(c, gate[0], in_userns); /* never returns */
		_exit(1);
	}
	close(gate[0]);
	struct report child = {.kind = "child", .pid = pid};
	int err = send_report(CONTROL_FD, &child, NULL, 0);
	close(gate[1]);
	return err;
}


/* container_main is the role: joins and makes the namespaces, forks the
 * container's init and reports it. */
static int container_main(void)
{
	struct message msg;
	struct failure f = {0};
	struct container *c = role_start("jail-container", "container", &msg, &f);
	if (c == NULL)
		return 1;
	if (c->ncreate_container_hooks > MAX_CONTAINER_HOOKS || c->nstart_container_hooks > MAX_CONTAINER_HOOKS) {
		fail(&f, "hooks", "more than %d of a kind", MAX_CONTAINER_HOOKS);
		goto failed;
	}
	bool in_userns = (c->new & CLONE_NEWUSER) != 0;
	for (size_t i = 0; i < c->njoin; i++)
		in_userns = in_userns || c->join[i].type == CLONE_NEWUSER;
	if (join_namespaces(c, true, &f) != 0)
		goto failed;
	if (c->new & CLONE_NEWUSER) {
		/* An unprivileged jail oci create writes the maps (and
		 * setgroups) through /proc/PID, whose files are root's while
		 * the role is not dumpable: dumpable until mapped then, as
		 * runc's nsexec. The role holds nothing its user does not.
		 * Asked before the unshare: in the new namespace, unmapped,
		 * geteuid is the overflow id, root's too, and root's role
		 * must not be dumpable: root's processes own the namespace it
		 * made, and those without CAP_SYS_PTRACE could then trace it
		 * and take its descriptors. */
		bool unprivileged = geteuid() != 0;
		if (unshare(CLONE_NEWUSER) != 0) {
			fail_errno(&f, "new namespaces", "user");
			goto failed;
		}
		if (unprivileged && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
			return 1;
		struct report userns = {.kind = "userns"};
		struct message mapped;
		if (send_report(CONTROL_FD, &userns, NULL, 0) != 0 || recv_message(CONTROL_FD, &mapped) != 0 ||
		    strcmp(mapped.kind, "mapped") != 0)
			return 1;
		if (unprivileged && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
			return 1;
	}
	if (in_userns && become_root(&f) != 0)
		goto failed;
	/* Changing ids cleared it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return 1;
	if (join_namespaces(c, false, &f) != 0)
		goto failed;
	if ((c->new & ~(int64_t)CLONE_NEWUSER) != 0 && unshare((int)(c->new & ~(int64_t)CLONE_NEWUSER)) != 0) {
		fail_errno(&f, "new namespaces", NULL);
		goto failed;
	}
	if (fork_reported(c, in_userns, container_init, &f) == 0)
		return 0;
	if (f.reason[0] == '\0')
		return 1; /* the report's send failed: nobody to tell */
failed:
	report_failure(CONTROL_FD, &f, 0);
	return 1;
}

/* entered_process is the exec's process, forked by the enter role inside
 * the container: its own session and terminal when it has one, reported
 * created, then the process itself. */
static _Noreturn void entered_process(const struct container *c, int gate, bool in_userns)
{
	(void)in_userns;
	struct failure f = {0};
	wait_gate(gate);
	int master = -1, tty = -1;
	if (c->process.terminal) {
		if (setsid() < 0) {
			fail_errno(&f, "setsid", NULL);
			report_failure(CONTROL_FD, &f, 0);
			_exit(1);
		}
		if (container_pty(&master, &tty, &f) != 0) {
			report_failure(CONTROL_FD, &f, 0);
			_exit(1);
		}
	}
	struct report created = {.kind = "created"};
	if (send_report(CONTROL_FD, &created, &master, master >= 0 ? 1 : 0) != 0)
		_exit(1);
	if (master >= 0)
		close(master);
	close(CONTROL_FD);
	int no_fifo = -1;
	container_process(c, tty, &no_fifo, NULL, &f);
	fprintf(stderr, "jail: %s%s%s\n", f.exec_code != 0 ? "" : f.step, f.exec_code != 0 ? "" : ": ", f.reason);
	_exit(f.exec_code != 0 ? f.exec_code : 1);
}

/*
 * The enter role (argv[0] "jail:enter"): a process of jail oci exec in a
 * running container. It joins every namespace of the container's init that
 * differs from its own at once (setns on the init's pidfd: nothing can
 * change between two joins), forks the process into the joined pid
 * namespace, reports its pid (child) and ends, leaving it to jail oci exec
 * (a subreaper) and to the shim after it. The process takes the container's
 * cgroup from the role, which jail oci exec moved in before anything ran.
 * It becomes the bundle's or the exec's process as the container's own
 * did (container_process): its filter, ids and capabilities come from the
 * request, which jail oci exec built from the container's state.
 */
static int enter_main(void)
{
	struct message msg;
	struct failure f = {0};
	struct container *c = role_start("jail-enter", "enter", &msg, &f);
	if (c == NULL)
		return 1;
	if (c->njoin != 1) {
		fail(&f, "enter", "one pidfd to join, not %zu", c->njoin);
		goto failed;
	}
	bool in_userns = (c->join[0].type & CLONE_NEWUSER) != 0;
	/* Inherited by the process it forks. */
	int apparmor = -1;
	if (container_oom_score_adj(&c->process, &f) != 0 || apparmor_open(&c->process, &apparmor, &f) != 0 ||
	    apparmor_write(apparmor, &c->process, &f) != 0)
		goto failed;
	if (setns(c->join[0].fd, (int)c->join[0].type) != 0) {
		fail_errno(&f, "enter", "setns");
		goto failed;
	}
	close(c->join[0].fd);
	if (in_userns && become_root(&f) != 0)
		goto failed;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		return 1;
	if (fork_reported(c, in_userns, entered_process, &f) == 0)
		return 0;
	if (f.reason[0] == '\0')
		return 1;
failed:
	report_failure(CONTROL_FD, &f, 0);
	return 1;
}
