// Package cgroupfile reads and writes cgroup files with plain system calls.
//
// Cgroup files can be polled, so package os registers each one it opens
// with Go's poller: two fcntl and two epoll_ctl calls more per file, seven
// calls where three do. Sandboxes move threads through tasks files, read
// their usage and kill through cgroup.kill on every start and end, in the
// supervisor and in a pool's forker; those go through here. The package
// links only golang.org/x/sys/unix, so a pool's forker links little.
package cgroupfile

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Read returns the whole of a cgroup file.
func Read(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// Write writes data to a cgroup file in one write, as the kernel takes it.
func Write(path, data string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Write(fd, []byte(data))
		if err == unix.EINTR {
			continue
		}
		if err == nil && n < len(data) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		return nil
	}
}

// OpenWrite opens a cgroup file for writing, for a file to hand to another
// process (os.NewFile leaves a blocking descriptor out of the poller).
func OpenWrite(path string) (*os.File, error) { return open(path, unix.O_WRONLY) }

// OpenReadWrite opens a cgroup file for reading and writing, for a file
// whose reads depend on what was written through the same descriptor
// (memory.peak); os.File's ReadAt and Write on it are plain system calls.
func OpenReadWrite(path string) (*os.File, error) { return open(path, unix.O_RDWR) }

func open(path string, mode int) (*os.File, error) {
	fd, err := unix.Open(path, mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
