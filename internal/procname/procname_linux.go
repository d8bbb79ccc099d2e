// Package procname names the running process as ps and top show it (its
// comm). The kernel names a process after the file it executed, and jail's
// helper programs run from a copy named after their version
// (".server-7e3eb2268630aa62"), a memfd (/proc/self/fd/N) or /proc/self/exe.
package procname

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Set names the process and the calling thread, and so the threads it
// starts from then on. The kernel keeps the first 15 bytes.
//
// ps shows the name of the process's first thread, which need not be the
// caller: Go may run main on another thread (it did, now and then, for the
// server). So the process is named through /proc/self/comm, which is the
// first thread's, and the calling thread with PR_SET_NAME.
func Set(name string) {
	_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
	if p, err := unix.BytePtrFromString(name); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
	}
}
