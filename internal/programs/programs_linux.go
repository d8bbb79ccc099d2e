// Package programs holds the helper programs jail starts and starts them:
//
//   - helper: what runs per sandbox, in C, one static binary (musl) chosen
//     by argv[0]: the sandbox's init ("jail:init", init/init.c), and the
//     cgroup janitor of one sandbox ("jail:cgroup-janitor",
//     janitor/janitor.c), which starts beside every `jail run`. The Go
//     runtime's start cost 1.9 ms of CPU and 199 page faults there against
//     0.06 ms and 12 for static musl, and under software emulation 91 ms
//     against 22. It is committed, built for each supported GOARCH
//     (helper/jail-helper-amd64 and -arm64, by helper/build.sh, which
//     `make helper` runs and TestHelperIsBuiltFromItsSources holds them
//     to) and embedded by helper_GOARCH.go: a program that imports jail
//     with nothing but `go get` has it.
//   - tools: what needs heavy dependencies and runs rarely: image import
//     and pull (go-containerregistry, package images/fetch), reading user
//     profiles (YAML, package profiles/files), compiling seccomp
//     filters (libseccomp through cgo, package seccomp/compile) and
//     setting `jail oci`'s cgroup v2 device programs (eBPF through
//     github.com/cilium/ebpf, package internal/oci/devices).
//   - server: `jail serve`, the HTTP API (net/http, package server), which
//     jail execs.
//   - gateway: a sandbox's egress gateway (--net allow=, docs/egress.md):
//     its HTTP and SOCKS proxies, resolver and captured ports, serving the
//     listeners the sandbox's init opened, started per sandbox by package
//     internal/egress/launch.
//
// Tools and server are Go programs too big to commit (19 MB): `go generate
// ./internal/programs` (make build does it; generate.sh) builds them into
// bin/, which is embedded, and writes generated.go, whose constant the jail
// command refers to, so that `go build ./cmd/jail` without them fails
// saying what to run. A library user's build has neither: image import and
// pull, user profiles and serving then fail with a message saying so
// (ErrNotBuilt). Keeping them out of the jail binary keeps its own start
// short (net/http alone added 0.6 ms to every `jail run`, yaml.v3 0.3-0.4
// ms, cilium/ebpf 0.13-0.17 ms; a test keeps them out) and the binary free
// of cgo. The server is not part of the tools program: a cgo binary's
// larger address space made each of the server's forks dearer. What else jail runs on a sandbox's behalf
// in Go (a pool's forker, the watching cgroup janitor, `jail check`'s
// probes, the holder of an id-mapping namespace) is the running binary
// re-executed, which calls jail.Init first.
//
// Every program runs from a copy in jail's private directory (see
// location: it follows from the uid, never the environment, and no sandbox
// may be given it), written once per program version; or else from a
// sealed memfd. Whatever the copy, what runs is a descriptor opened once
// and compared byte for byte with the embedded program before it is
// executed (through /proc/self/fd): a copy replaced or rewritten by anyone
// never runs.
package programs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

//go:generate sh generate.sh

// Names of the programs.
const (
	Helper  = "helper"
	Tools   = "tools"
	Server  = "server"
	Gateway = "gateway"
)

// InitArg is argv[0] of the helper program started as a sandbox's init
// (the janitor's is janitor.Arg).
const InitArg = "jail:init"

// ErrNotBuilt: this build of jail has not the program asked for (the errors
// of Open wrap it).
var ErrNotBuilt = errors.New("build it with make build, or go generate ./internal/programs first")

// memfdFD is the lowest descriptor a program's descriptor (of its copy, or
// of a memfd) is kept at. A child started from it gets its descriptors by
// dup2 before the exec, onto 0..n-1 and passing through n..2n-1 (n: stdio
// plus the files it is handed), so the program's must sit above them
// (PathFor). It stays below 64, the descriptor
// table a process starts with: growing the table in a process with threads
// waits for an RCU grace period, about 8 ms here, on every start.
const memfdFD = 32

// Program is an executable to start: a descriptor of its bytes, checked to
// be the embedded program's, which is what is executed (through
// /proc/self/fd), so that no path is trusted twice.
type Program struct {
	// Path is what to execute: /proc/self/fd/N of the checked copy or of
	// a sealed memfd.
	Path string
	file *os.File
}

// Version is the embedded program's version (the start of its SHA-256), or
// "" when the build has none.
func Version(name string) string {
	sum := helperSHA256
	if name != Helper {
		b, err := embedded.ReadFile("bin/" + name + ".sha256")
		if err != nil {
			return ""
		}
		sum = string(b)
	}
	if v := strings.TrimSpace(sum); len(v) >= 16 {
		return v[:16]
	}
	return ""
}

// embeddedProgram reports whether this build embeds Go program name.
func embeddedProgram(name string) bool {
	_, err := fs.Stat(embedded, "bin/"+name)
	return err == nil
}

// programBytes returns the embedded program name's bytes, as a reader
// (embed.FS's ReadFile would copy the 19 MB of the tools), and its size.
func programBytes(name string) (io.ReaderAt, int64, error) {
	if name == Helper {
		return strings.NewReader(helperBinary), int64(len(helperBinary)), nil
	}
	f, err := embedded.Open("bin/" + name)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	return f.(io.ReaderAt), info.Size(), nil
}

// readProgram returns a copy of the embedded program name's bytes.
func readProgram(name string) ([]byte, error) {
	r, size, err := programBytes(name)
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}

// Open returns program name to start: a descriptor of its copy in jail's
// private directory (written once per program version), whose bytes were
// compared with the embedded program's here, or else of a sealed memfd.
// It is a Source's Open, for one program.
func Open(name string) (*Program, error) {
	src := NewSource(nil)
	defer src.Close()
	return src.Open(name)
}

// Source is where one task (a sandbox's start, which needs the helper
// program as its init and as its janitor) opens programs from: jail's
// private directory for the caller's programs (see location), found,
// opened and checked the first time a program is asked, and held until
// Close, so that the task walks the directory's path once; or, where there
// is none to use, sealed memfds. The helper is opened and checked once per
// Source, and each Open of it returns a descriptor of its own of that
// file. It may be asked from several goroutines.
type Source struct {
	users *privdir.Passwd
	once  sync.Once
	dir   *os.File // O_PATH; nil when none could be used (err says why)
	err   error

	helperOnce sync.Once
	helper     *os.File // the checked copy or memfd; nil: helperErr says why
	helperErr  error

	closed bool // by Close: Open fails
}

// errSourceClosed is what a Source's Open returns after its Close.
var errSourceClosed = errors.New("program source closed")

// NewSource returns a Source of the caller's programs, which asks users
// (nil: reads the password database) for the caller's home when the
// caller has no private runtime directory.
func NewSource(users *privdir.Passwd) *Source { return &Source{users: users} }

// Close releases the directory and the Source's own descriptor of the
// helper; programs opened from it stay open, and Open fails after it. It
// must not run beside Open.
func (s *Source) Close() {
	// Open checks closed first: no once runs after this.
	s.closed = true
	if s.dir != nil {
		s.dir.Close()
		s.dir = nil
	}
	if s.helper != nil {
		s.helper.Close()
		s.helper = nil
	}
}

// Open returns program name to start (see the function Open).
func (s *Source) Open(name string) (*Program, error) {
	if s.closed {
		// An Open after Close is its caller's mistake: a memfd would hide it.
		return nil, fmt.Errorf("%s program: %w", name, errSourceClosed)
	}
	if name == Tools && handedTools != nil {
		// The server program's: jail opened and checked it (ExecServer).
		fd, err := unix.FcntlInt(handedTools.Fd(), unix.F_DUPFD_CLOEXEC, memfdFD)
		if err != nil {
			return nil, fmt.Errorf("%s program: %w", name, err)
		}
		return &Program{Path: fmt.Sprintf("/proc/self/fd/%d", fd), file: os.NewFile(uintptr(fd), handedTools.Name())}, nil
	}
	if name != Helper {
		f, err := s.open(name)
		if err != nil {
			return nil, err
		}
		return &Program{Path: fmt.Sprintf("/proc/self/fd/%d", f.Fd()), file: f}, nil
	}
	s.helperOnce.Do(func() { s.helper, s.helperErr = s.open(Helper) })
	if s.helperErr != nil {
		return nil, s.helperErr
	}
	fd, err := unix.FcntlInt(s.helper.Fd(), unix.F_DUPFD_CLOEXEC, memfdFD)
	if err != nil {
		return nil, fmt.Errorf("%s program: %w", name, err)
	}
	return &Program{Path: fmt.Sprintf("/proc/self/fd/%d", fd), file: os.NewFile(uintptr(fd), s.helper.Name())}, nil
}

// open returns a descriptor of program name's checked copy, or of a sealed
// memfd holding it.
func (s *Source) open(name string) (*os.File, error) {
	version := Version(name)
	if version == "" || (name != Helper && !embeddedProgram(name)) {
		// (The server program knows the tools program's version only.)
		return nil, fmt.Errorf("this build of jail has no %s program (%w)", name, ErrNotBuilt)
	}
	s.once.Do(func() {
		base, path := location(os.Geteuid(), s.users)
		if path == "" {
			s.err = errors.New("no home or runtime directory")
			return
		}
		s.dir, s.err = openDir(base, path)
	})
	err := s.err
	var f *os.File
	if err == nil {
		f, err = cachedCopy(s.dir, name, version)
	}
	if err != nil {
		if memfdExecForbidden() {
			return nil, fmt.Errorf("%s program: no private directory to run it from (%v), and this host forbids executing memfds (vm.memfd_noexec=2)", name, err)
		}
		data, err := readProgram(name)
		if err != nil {
			return nil, fmt.Errorf("%s program: %w", name, err)
		}
		if f, err = sealedMemfd(name, data); err != nil {
			return nil, fmt.Errorf("%s program: %w", name, err)
		}
	}
	return f, nil
}

// File is the descriptor the program runs from. It stays the Program's. Another
// process that is to execute the program (a pool's forker) is handed File
// and executes it as its own /proc/self/fd/N: another process's
// /proc/PID/fd/N cannot serve, since a child in a new user namespace may
// not follow it.
func (p *Program) File() *os.File { return p.file }

// PathFor returns what to execute in a child handed extra descriptors
// besides stdio: Path, after moving the program's descriptor out of the way
// of the child's descriptor setup when there are that many.
func (p *Program) PathFor(extra int) (string, error) {
	above := 2 * (3 + extra)
	if int(p.file.Fd()) >= above {
		return p.Path, nil
	}
	high, err := unix.FcntlInt(p.file.Fd(), unix.F_DUPFD_CLOEXEC, above)
	if err != nil {
		return "", fmt.Errorf("move program descriptor: %w", err)
	}
	p.file.Close()
	p.file = os.NewFile(uintptr(high), p.file.Name())
	p.Path = fmt.Sprintf("/proc/self/fd/%d", high)
	return p.Path, nil
}

// Exec replaces the calling process with program name, run with argv (argv[0]
// included): for a command that is all the program's, such as serving, whose
// process then keeps the caller's pid, stdio and signals. It returns only on
// failure.
func Exec(name string, argv []string) error {
	return execWith(name, argv, os.Environ())
}

func execWith(name string, argv, env []string) error {
	p, err := Open(name)
	if err != nil {
		return err
	}
	// The descriptor's path stays valid through the exec: the kernel
	// opens the program before it closes the close-on-exec descriptors.
	err = syscall.Exec(p.Path, argv, env)
	p.Close()
	return fmt.Errorf("%s program: %w", name, err)
}

// Close releases the program's descriptor, if any; processes already
// started from the program keep running.
func (p *Program) Close() error {
	if p.file == nil {
		return nil
	}
	return p.file.Close()
}

// Dirs lists every directory location may name for the caller, whatever
// the state of the machine: what the mount policy keeps from sandboxes.
// users is asked for the caller's home (nil: the password database is
// read).
func Dirs(users *privdir.Passwd) []string {
	uid := os.Geteuid()
	if uid == 0 {
		return []string{"/run/jail"}
	}
	dirs := []string{filepath.Join(runtimeBase(uid), "jail")}
	if home, err := users.HomeOf(uid); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "jail"))
	}
	return dirs
}

func runtimeBase(uid int) string { return "/run/user/" + strconv.Itoa(uid) }

// location returns where the programs are copied for uid, and so a
// directory no sandbox may be given, nor one holding it, with the existing
// directory above it that it is made under. It follows from the uid, never
// from the environment (which a cron job, an ssh session without PAM or a
// CI step sets otherwise): /run/jail for root; /run/user/UID/jail for
// others when /run/user/UID is private to them (package privdir), or else
// ~/.cache/jail in their home in the password database (asked of users);
// "" when there is nowhere to put them.
func location(uid int, users *privdir.Passwd) (base, dir string) {
	if uid == 0 {
		return "/run", "/run/jail"
	}
	if run := runtimeBase(uid); isPrivate(run, uid) {
		return run, filepath.Join(run, "jail")
	}
	if home, err := users.HomeOf(uid); err == nil {
		return home, filepath.Join(home, ".cache", "jail")
	}
	return "", ""
}

func isPrivate(dir string, uid int) bool {
	_, err := privdir.Check(dir, uid)
	return err == nil
}

// openDir opens the programs' directory path, made if needed below base
// (privdir.MkdirAll), where programs can be executed.
func openDir(base, path string) (*os.File, error) {
	dir, err := privdir.MkdirAll(base, path, os.Geteuid(), 0o711, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(dir.Fd()), &fs); err != nil {
		dir.Close()
		return nil, err
	}
	if fs.Flags&unix.ST_NOEXEC != 0 {
		dir.Close()
		return nil, fmt.Errorf("%s: mounted noexec", path)
	}
	return dir, nil
}

// cachedCopy returns a descriptor of program name's copy in dir, writing
// the copy first if needed, at memfdFD or above. Copying the program for
// every sandbox would cost a millisecond or more; instead the copy is
// opened once, without following links, and its bytes are compared with
// the embedded program's through that descriptor, which is then what runs:
// whatever was put in its place (a sandbox handed the directory under
// another environment, cf. runc's CVE-2019-5736) never runs, and is
// replaced. The comparison maps the copy from the page cache: Open took
// about 20 µs for the init (120 KB), directory checks included, against 3
// µs when only owner, mode and size were checked (BenchmarkOpen), and 0.6
// ms for the tools; a cold `jail run` takes about 10 more minor page
// faults, and no more time than the noise of 400 interleaved runs. Hashing
// the init alone took 65 µs. A Source does it once for the helper, which
// a sandbox's start runs twice (init and janitor).
//
// A use marks the copy as in use (its modification time, refreshed at most
// every quarter of staleCopy), and writing a version's copy removes only
// the copies of other versions unused for staleCopy: on tmpfs they hold
// memory, but a jail of another version that is starting one at that
// moment must still find it.
func cachedCopy(dir *os.File, name, version string) (*os.File, error) {
	file := "." + name + "-" + version
	f, mtime, err := openCopy(dir, name, file)
	if err != nil {
		// Missing, or not jail's: written (anew) and checked again.
		if werr := writeCopy(dir, name, file); werr != nil {
			return nil, fmt.Errorf("%s: %v; writing it: %w", file, err, werr)
		}
		if f, mtime, err = openCopy(dir, name, file); err != nil {
			return nil, err
		}
	}
	if time.Since(mtime) > staleCopy/4 {
		_ = unix.UtimesNanoAt(int(dir.Fd()), file, nil, unix.AT_SYMLINK_NOFOLLOW)
	}
	return f, nil
}

// openCopy opens file in dir and returns its descriptor, at memfdFD or
// above, and its modification time, if it is program name's copy as jail
// writes it: a regular file of this user's with no other link, no write
// permission, and exactly the embedded program's bytes.
func openCopy(dir *os.File, name, file string) (*os.File, time.Time, error) {
	want, size, err := programBytes(name)
	if err != nil {
		return nil, time.Time{}, err
	}
	// Non-blocking until it is known to be a regular file: a FIFO in its
	// place must not hang the open.
	fd, err := unix.Openat(int(dir.Fd()), file, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, time.Time{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o7222 != 0 || st.Nlink != 1 || st.Size != size {
		unix.Close(fd)
		return nil, time.Time{}, errors.New("not the copy jail wrote")
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, memfdFD)
	unix.Close(fd)
	if err != nil {
		return nil, time.Time{}, err
	}
	if _, err := unix.FcntlInt(uintptr(high), unix.F_SETFL, 0); err != nil {
		unix.Close(high)
		return nil, time.Time{}, err
	}
	if err := sameBytes(high, want, st.Size); err != nil {
		unix.Close(high)
		return nil, time.Time{}, err
	}
	return os.NewFile(uintptr(high), file), time.Unix(st.Mtim.Unix()), nil
}

// sameBytes compares the first size bytes of the file fd with want's. The
// file is mapped rather than read: read into a buffer, the comparison
// grew the stack of the goroutine that starts the janitor, and the fresh
// stack's page faults cost more than the comparison.
func sameBytes(fd int, want io.ReaderAt, size int64) error {
	if size == 0 {
		return nil
	}
	got, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("map the copy: %w", err)
	}
	defer unix.Munmap(got)
	var expected [4 << 10]byte
	for off := 0; off < len(got); {
		n := min(len(expected), len(got)-off)
		if _, err := want.ReadAt(expected[:n], int64(off)); err != nil {
			return err
		}
		if !bytes.Equal(got[off:off+n], expected[:n]) {
			return errors.New("not the embedded program's bytes")
		}
		off += n
	}
	return nil
}

// staleCopy is how long a copy of a program goes unused before a jail of
// another version may remove it.
const staleCopy = time.Hour

// retired are programs that earlier versions of jail copied (the helper
// replaced the init and janitor programs, and the running binary the stage
// program): their copies, written under a home's ~/.cache/jail too, go
// once unused for staleCopy, as other versions' copies do.
var retired = []string{"init", "janitor", "stage"}

// writeCopy writes the embedded program name as file in dir (in place of
// whatever is there), then removes the copies of its other versions, and
// of retired programs, that have gone unused for staleCopy (and what an
// interrupted write left).
func writeCopy(dir *os.File, name, file string) error {
	data, err := readProgram(name)
	if err != nil {
		return err
	}
	// Put in place whole: a concurrent jail sees no copy, the old one or
	// all of the new one. Others may read and execute it: the sandboxes'
	// ids execute the init.
	if err := privdir.WriteFile(int(dir.Fd()), file, "."+name+"-tmp-", data, 0o555); err != nil {
		return err
	}
	listing, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	list := os.NewFile(uintptr(listing), ".")
	entries, _ := list.ReadDir(-1)
	list.Close()
	for _, e := range entries {
		old := e.Name()
		if old == file || !isCopyOf(old, append([]string{name}, retired...)) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), old, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && time.Since(time.Unix(st.Mtim.Unix())) > staleCopy {
			_ = unix.Unlinkat(int(dir.Fd()), old, 0)
		}
	}
	return nil
}

// isCopyOf tells whether file is named as a copy of one of programs.
func isCopyOf(file string, programs []string) bool {
	for _, p := range programs {
		if strings.HasPrefix(file, "."+p+"-") {
			return true
		}
	}
	return false
}

func memfdExecForbidden() bool {
	b, err := os.ReadFile("/proc/sys/vm/memfd_noexec")
	return err == nil && strings.TrimSpace(string(b)) == "2"
}

// sealedMemfd returns a close-on-exec memfd at memfdFD holding data, sealed
// against any change.
func sealedMemfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("jail-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Before 6.3 there is no MFD_EXEC: every memfd is executable.
		fd, err = unix.MemfdCreate("jail-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err != nil {
			return nil, err
		}
		data = data[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_FUTURE_WRITE); err != nil {
		return nil, err
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, memfdFD)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(high), "jail-"+name), nil
}
