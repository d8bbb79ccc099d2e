// Package netns makes network namespaces for the egress tests and
// benchmark, and listens inside them, from threads that enter a namespace
// and return to the caller's own: the process itself never leaves its
// namespace, and nothing of the machine's network is touched.
package netns

import (
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// New makes a network namespace with its loopback up and returns it.
func New() (*os.File, error) {
	var ns *os.File
	err := inThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		var err error
		if ns, err = os.Open("/proc/thread-self/ns/net"); err != nil {
			return err
		}
		return loopbackUp()
	})
	if err != nil && ns != nil {
		ns.Close()
		ns = nil
	}
	return ns, err
}

// Listen listens on addr inside the namespace ns.
func Listen(ns *os.File, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return err
		}
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// inThread runs f on a thread of its own, which returns to the caller's
// network namespace afterwards; a thread that cannot return ends with its
// goroutine (it stays locked).
func inThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer self.Close()
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
