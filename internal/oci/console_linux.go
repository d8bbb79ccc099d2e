package oci

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// roleStdio is the stdio a role is started with: this command's, or, when
// the process has a terminal, none (spawn.Start gives /dev/null), as runc
// gives it. The terminal becomes the process's stdio; until it does (for
// a container, until start) the process would hold this command's stdout
// and stderr, which containerd's shim reads to their end before it takes
// the terminal's master from the console socket: create never ended for
// it.
func roleStdio(terminal bool) []*os.File {
	if terminal {
		return []*os.File{nil, nil, nil}
	}
	return []*os.File{os.Stdin, os.Stdout, os.Stderr}
}

// sendConsole sends the container's terminal master to the unix socket at
// path (--console-socket), as runc does: one message whose data is the
// file's name and whose SCM_RIGHTS holds its descriptor.
func sendConsole(path string, master *os.File) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("console socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return fmt.Errorf("console socket %s: %w", path, err)
	}
	name := master.Name()
	if name == "" {
		name = "/dev/ptmx"
	}
	if err := unix.Sendmsg(fd, []byte(name), unix.UnixRights(int(master.Fd())), nil, 0); err != nil {
		return fmt.Errorf("console socket %s: %w", path, err)
	}
	return nil
}
