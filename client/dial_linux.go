package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/jail-sandbox/jail/internal/socketdir"
)

// dial connects to the server's socket at path, through its directory
// checked to belong to the users of uids and to be changeable by no one
// else, and makes sure that the socket and the server answering on it are
// theirs.
func dial(ctx context.Context, path string, uids []int) (net.Conn, error) {
	refuse := func(err error) error { return fmt.Errorf("jail: server socket %s: %w", path, err) }
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, refuse(err)
	}
	dirPath, name := filepath.Split(abs)
	dir, err := socketdir.Open(dirPath, socketdir.Policy{Owners: uids})
	if err != nil {
		return nil, refuse(err)
	}
	defer dir.Close()
	st, err := dir.Lstat(name)
	if err != nil {
		return nil, refuse(err)
	}
	if !socketdir.IsSocket(st) {
		return nil, refuse(errors.New("not a socket"))
	}
	if !slices.Contains(uids, int(st.Uid)) {
		return nil, refuse(fmt.Errorf("belongs to uid %d, whom this client does not trust (client.ServerUser)", st.Uid))
	}
	via, err := dir.Via(name)
	if err != nil {
		return nil, refuse(err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", via)
	if err != nil {
		return nil, refuse(err)
	}
	// The checks above stand for the socket's path; the peer's
	// credentials, which the kernel took when the server listened, for
	// the server itself.
	uid, err := peerUID(c.(*net.UnixConn))
	if err == nil && !slices.Contains(uids, uid) {
		err = fmt.Errorf("the server runs as uid %d, whom this client does not trust (client.ServerUser)", uid)
	}
	if err != nil {
		c.Close()
		return nil, refuse(err)
	}
	return c, nil
}

// peerUID is the user of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if credErr != nil {
		return -1, fmt.Errorf("peer credentials: %w", credErr)
	}
	return int(cred.Uid), nil
}
