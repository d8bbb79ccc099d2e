package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/socketdir"
)

// DefaultSocket is where `jail serve` listens: /run/jail/jail.sock for root,
// $XDG_RUNTIME_DIR/jail/jail.sock for anyone else.
func DefaultSocket() (string, error) {
	if os.Geteuid() == 0 {
		return "/run/jail/jail.sock", nil
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" || !filepath.IsAbs(dir) {
		return "", errors.New("XDG_RUNTIME_DIR is not set: give --socket PATH")
	}
	return filepath.Join(dir, "jail", "jail.sock"), nil
}

// Listen opens the socket at path with mode 0600, in a directory that only
// the serving user may change (see package socketdir), which it creates
// with mode 0700 if missing, and refuses one that others could change:
// they could move the socket away and bind their own in its place. A
// socket left by a server that is gone is replaced; one that a live server
// answers on is not. The socket is reached through the directory's
// descriptor, never by path once the directory is checked.
func Listen(path string) (net.Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dirPath, name := filepath.Split(abs)
	dir, err := socketdir.Open(dirPath, socketdir.Policy{Owners: []int{os.Geteuid()}, Create: true})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			dir.Close()
		}
	}()
	via, err := dir.Via(name)
	if err != nil {
		return nil, err
	}
	if st, err := dir.Lstat(name); err == nil {
		if !socketdir.IsSocket(st) {
			return nil, fmt.Errorf("%s exists and is not a socket", abs)
		}
		if c, err := net.DialTimeout("unix", via, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: a server already answers there", abs)
		}
		if err := dir.Remove(name); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", abs, err)
		}
	}
	// The socket is born 0600: there is no moment where others may
	// connect.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", via)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", abs, err)
	}
	// Removed by listener.Close, through the directory.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	st, err := dir.Lstat(name)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	var userns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &userns); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen on %s: own user namespace: %w", abs, err)
	}
	ok = true
	return &listener{Listener: l, dir: dir, name: name, addr: &net.UnixAddr{Name: abs, Net: "unix"}, dev: st.Dev, ino: st.Ino,
		userns: [2]uint64{userns.Dev, userns.Ino}}, nil
}

// Accept returns the next connection of a client that is not confined in
// a user namespace below the server's. The socket's mode lets every
// process of the serving user connect, and a rootless sandbox's processes
// are that user: where the socket is visible on the host tree (outside
// /run, /tmp and homes; a read-only mount does not stop connect()), a
// sandbox asked the server for a sandbox with a writable mount of what it
// could only read. Such connections are closed unanswered.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := checkPeer(c, l.userns); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

// checkPeer refuses a connection whose client (the process that connected)
// is in a user namespace below own (the server's), or cannot be told.
func checkPeer(c net.Conn, own [2]uint64) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	pid, uid, pidfd := 0, -1, -1
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			credErr = err
			return
		}
		pid, uid = int(cred.Pid), int(cred.Uid)
		// The client as it connected (Linux 6.5+), whatever took its
		// pid since.
		if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = p
		}
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if uid != os.Geteuid() {
		// Root, whom the socket's mode lets in besides the serving
		// user (a sandbox's ids show as the user's, or overflow ids).
		if uid == 0 {
			return nil
		}
		return fmt.Errorf("client of uid %d", uid)
	}
	if pid <= 0 {
		return errors.New("the client's process is not visible here")
	}
	if pidfd < 0 {
		// Older kernels: pinned now, so at least the check and the
		// liveness test below are of one process.
		if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
			return fmt.Errorf("client %d: %w", pid, err)
		}
	}
	defer unix.Close(pidfd)
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("client %d: user namespace: %w", pid, err)
	}
	defer func() { unix.Close(ns) }()
	// The namespace read is the client's only if the client still lives
	// (a live process keeps its pid).
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("client %d: gone: %w", pid, err)
	}
	// Up from the client's namespace: reaching the server's means the
	// client is confined below it. Above the server's own (an ancestor's,
	// or another branch) the kernel answers EPERM: not below.
	for depth := 0; depth < 64; depth++ {
		var st unix.Stat_t
		if err := unix.Fstat(ns, &st); err != nil {
			return err
		}
		if st.Dev == own[0] && st.Ino == own[1] {
			if depth == 0 {
				return nil
			}
			return fmt.Errorf("client %d: in a user namespace below the server's (a sandbox)", pid)
		}
		parent, err := unix.IoctlRetInt(ns, unix.NS_GET_PARENT)
		if err == unix.EPERM {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client %d: user namespace: %w", pid, err)
		}
		unix.Close(ns)
		ns = parent
	}
	return fmt.Errorf("client %d: user namespaces nested too deep", pid)
}

// listener is the server's socket. Closing it removes the socket file, if
// it is still the one it bound.
type listener struct {
	net.Listener
	dir      *socketdir.Dir
	name     string
	addr     net.Addr
	dev, ino uint64
	// userns is the server's user namespace (device, inode).
	userns [2]uint64
	once   sync.Once
}

func (l *listener) Addr() net.Addr { return l.addr }

func (l *listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		if st, err := l.dir.Lstat(l.name); err == nil && st.Dev == l.dev && st.Ino == l.ino {
			_ = l.dir.Remove(l.name)
		}
		l.dir.Close()
	})
	return err
}
