// Package procname names the running process as ps and top show it (its
// comm). jail's helper programs are executed through a descriptor
// (/proc/self/fd/N) or /proc/self/exe, and the kernel would name them "N"
// or "exe" after the executed file.
package procname

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Set names the calling thread, and so the process when called from its
// main thread, and the threads it starts from then on. The kernel keeps the
// first 15 bytes.
func Set(name string) {
	if p, err := unix.BytePtrFromString(name); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
	}
}
