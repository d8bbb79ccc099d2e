package oci

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MaxPreservedFDs bounds --preserve-fds (MAX_PRESERVED_FDS of the
// container role): the descriptors travel with the container's
// description, which carries at most control.MaxFiles.
const MaxPreservedFDs = 32

// preservedFDs takes the n descriptors after stdio that this process was
// given (3, 4, ...) for the container's process, which gets them at the
// same numbers (--preserve-fds, as runc). Each must be open and inherited:
// a descriptor that is close-on-exec is one this process opened itself
// (Go opens every file so), which a caller that passed fewer than it said
// must not hand the container. The files are close-on-exec from here on,
// so that only the container's process gets them, not a hook or the role
// before it is told. The caller closes them.
func preservedFDs(n int) ([]*os.File, error) {
	if n < 0 || n > MaxPreservedFDs {
		return nil, fmt.Errorf("--preserve-fds %d: must be from 0 to %d", n, MaxPreservedFDs)
	}
	files := make([]*os.File, 0, n)
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for fd := 3; fd < 3+n; fd++ {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			return fail(fmt.Errorf("--preserve-fds %d: descriptor %d is not open", n, fd))
		}
		if flags&unix.FD_CLOEXEC != 0 {
			return fail(fmt.Errorf("--preserve-fds %d: descriptor %d was not given to jail (it is jail's own)", n, fd))
		}
		files = append(files, os.NewFile(uintptr(fd), "preserved-"+strconv.Itoa(fd)))
	}
	for _, f := range files {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			return fail(fmt.Errorf("--preserve-fds: descriptor %d: %w", f.Fd(), err))
		}
	}
	if err := passable(n, files); err != nil {
		return fail(err)
	}
	return files, nil
}

// passable checks that the kernel passes each of files in a message, as
// the role's message carries them: it refuses some (an io_uring's, with
// EINVAL), which would otherwise fail that message once the container's
// state, cgroup and role are made, with an error naming no descriptor.
// The copies sent are dropped with the socket pair.
func passable(n int, files []*os.File) error {
	if len(files) == 0 {
		return nil
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("--preserve-fds: socket pair: %w", err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	for _, f := range files {
		if err := unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(int(f.Fd())), nil, unix.MSG_DONTWAIT); err != nil {
			return fmt.Errorf("--preserve-fds %d: descriptor %d cannot be passed on: %w", n, f.Fd(), err)
		}
	}
	return nil
}
