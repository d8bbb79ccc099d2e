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
	ok = true
	return &listener{Listener: l, dir: dir, name: name, addr: &net.UnixAddr{Name: abs, Net: "unix"}, dev: st.Dev, ino: st.Ino}, nil
}

// listener is the server's socket. Closing it removes the socket file, if
// it is still the one it bound.
type listener struct {
	net.Listener
	dir      *socketdir.Dir
	name     string
	addr     net.Addr
	dev, ino uint64
	once     sync.Once
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
