// Package procname names the running process as ps and top show it (its
// comm). The kernel names a process after the file it executed, and jail's
// helper programs run from a copy named after their version
// (".stage-7e3eb2268630aa62"), a memfd (/proc/self/fd/N) or /proc/self/exe.
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
