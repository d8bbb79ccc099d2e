// Package programs holds the five helper programs built into jail and
// starts them:
//
//   - init: a sandbox's init, in C (init/init.c): the stage that every
//     sandbox starts, inside its namespaces. The Go runtime's start cost
//     1.9 ms of CPU and 199 page faults there against 0.4 ms and 28 for
//     static glibc (0.06 ms and 12 for static musl, which cbuild.sh links
//     where it is installed), and under software emulation 91 ms against
//     22. It speaks the control
//     protocol and builds the root as the Go init (package initstage) does,
//     which runs in its place in a build without it.
//   - stage: a pool's forker and the watching cgroup janitor (package
//     stage), and the Go init. It links only what they need and starts in
//     about a third of the time the jail binary takes.
//   - janitor: the cgroup janitor of one sandbox (cgroups/janitor), in C
//     (janitor/janitor.c): one starts beside every `jail run`, at the moment
//     the sandbox's init starts, and a Go program's start and exit took 1.9
//     ms of CPU there against 0.35 ms. Builds without it use the stage
//     program's.
//   - tools: what needs heavy dependencies and runs rarely: image import
//     and pull (go-containerregistry, package images/fetch), reading user
//     profiles (YAML, package profiles/files) and compiling seccomp
//     filters (libseccomp through cgo, package seccomp/compile).
//   - server: `jail serve`, the HTTP API (net/http, package server), which
//     jail execs. It embeds the init and stage programs, for its sandboxes.
//
// Keeping these out of the jail binary keeps its own start short (net/http
// alone added 0.6 ms to every `jail run`, yaml.v3 0.3-0.4 ms; a test
// keeps them out) and the binary free of cgo. The
// server is pure Go, not part of the tools program: a cgo binary's larger
// address space made each of the server's forks dearer.
//
// They are built and embedded at build time (go generate
// ./internal/programs; make build does it: the C programs by cbuild.sh, the
// Go ones by gobuild.sh, which says why) and run from a copy in jail's
// runtime directory, written once per program version, which no sandbox can
// see; or else from a sealed memfd. A build without them (a plain go build)
// starts the stages by re-executing the running binary instead, which then
// must call stage.Main first thing (jail.Init does), and has neither tools
// nor server: image import and pull, user profiles and serving then fail
// with a message saying so.
package programs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

//go:generate sh cbuild.sh bin/janitor ./janitor/janitor.c
//go:generate sh cbuild.sh bin/init ./init/init.c
//go:generate sh -c "CGO_ENABLED=0 LDFLAGS=-s sh gobuild.sh -o bin/stage ./stage && sha256sum bin/stage | cut -c1-64 > bin/stage.sha256"
//go:generate sh -c "CGO_ENABLED=0 LDFLAGS=-s sh gobuild.sh -tags jail_server -o bin/server ./server && sha256sum bin/server | cut -c1-64 > bin/server.sha256"
//go:generate sh -c "LDFLAGS='-s -linkmode external -extldflags -static' sh gobuild.sh -tags netgo,osusergo -o bin/tools ./tools && sha256sum bin/tools | cut -c1-64 > bin/tools.sha256"

// Names of the programs.
const (
	Stage   = "stage"
	Init    = "init"
	Janitor = "janitor"
	Tools   = "tools"
	Server  = "server"
)

// ErrNotBuilt: this build of jail has not the program asked for (the errors
// of Open wrap it).
var ErrNotBuilt = errors.New("build it with make build, or go generate ./internal/programs first")

// memfdFD is the lowest descriptor a program's memfd is kept at. A child
// started from it gets its descriptors by dup2 before the exec, onto 0..n-1
// and passing through n..2n-1 (n: stdio plus the files it is handed), so the
// memfd must sit above them (PathFor). It stays below 64, the descriptor
// table a process starts with: growing the table in a process with threads
// waits for an RCU grace period, about 8 ms here, on every start.
const memfdFD = 32

// Program is an executable to start.
type Program struct {
	// Path is what to execute: the cached copy, /proc/self/fd/N of a
	// sealed memfd, or /proc/self/exe.
	Path string
	file *os.File
}

// Version is the embedded program's version (the start of its SHA-256), or
// "" when the build has none.
func Version(name string) string {
	sum, err := embedded.ReadFile("bin/" + name + ".sha256")
	if v := strings.TrimSpace(string(sum)); err == nil && len(v) >= 16 {
		return v[:16]
	}
	return ""
}

// Open returns program name to start: from a copy in the caller's runtime
// directory (written once per program version) or else from a sealed
// memfd. Without an embedded copy, the stage program is the running
// executable and the others are ErrNotBuilt.
func Open(name string) (*Program, error) {
	return open(name, true)
}

// OpenCopy is Open for a program that another process of the same user is
// to execute (a pool's forker): only the copy on disk names it there, so
// without one it fails rather than making a memfd.
func OpenCopy(name string) (*Program, error) {
	return open(name, false)
}

func open(name string, memfd bool) (*Program, error) {
	self := &Program{Path: "/proc/self/exe"}
	version := Version(name)
	if version == "" {
		if name == Stage {
			return self, nil
		}
		return nil, fmt.Errorf("this build of jail has no %s program (%w)", name, ErrNotBuilt)
	}
	if dir := Dir(); dir != "" {
		if path, err := cachedCopy(dir, name, version); err == nil {
			return &Program{Path: path}, nil
		}
	}
	if !memfd {
		return nil, fmt.Errorf("%s program: no copy on disk to run it from", name)
	}
	if memfdExecForbidden() {
		if name == Stage {
			return self, nil
		}
		return nil, fmt.Errorf("%s program: no private directory to run it from, and this host forbids executing memfds (vm.memfd_noexec=2)", name)
	}
	data, err := embedded.ReadFile("bin/" + name)
	if err != nil {
		return nil, fmt.Errorf("%s program: %w", name, err)
	}
	f, err := sealedMemfd(name, data)
	if err != nil {
		return nil, fmt.Errorf("%s program: %w", name, err)
	}
	return &Program{Path: fmt.Sprintf("/proc/self/fd/%d", f.Fd()), file: f}, nil
}

// PathFor returns what to execute in a child handed extra descriptors
// besides stdio: Path, after moving a memfd's descriptor out of the way of
// the child's descriptor setup when there are that many.
func (p *Program) PathFor(extra int) (string, error) {
	if p.file == nil {
		return p.Path, nil
	}
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
	p, err := Open(name)
	if err != nil {
		return err
	}
	// A memfd's path stays valid through the exec: the kernel opens the
	// program before it closes the close-on-exec descriptors.
	err = syscall.Exec(p.Path, argv, os.Environ())
	p.Close()
	return fmt.Errorf("%s program: %w", name, err)
}

// Close releases the memfd, if any; processes already started from the
// program keep running.
func (p *Program) Close() error {
	if p.file == nil {
		return nil
	}
	return p.file.Close()
}

// Dir is where the programs are copied, and so a directory no sandbox may
// be given, nor one holding it: /run/jail for root,
// $XDG_RUNTIME_DIR/jail for others, or their cache directory (~/.cache/jail)
// when they have none; "" when there is nowhere to put them.
func Dir() string {
	if os.Geteuid() == 0 {
		return "/run/jail"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "jail")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "jail")
	}
	return ""
}

// cachedCopy returns the path of the program in dir, writing it there first
// if needed. Copying it for every sandbox would cost a millisecond or more;
// a copy that only its owner could have written (only this user can write
// dir, the file read-only and of the embedded size) is as trustworthy as
// the jail binary itself. Inside sandboxes, /run and $XDG_RUNTIME_DIR are
// private tmpfs mounts (and so are /root and /home, for the cache
// directory), so no sandbox ever sees it.
//
// A use marks the copy as in use (its modification time, refreshed at most
// every quarter of staleCopy), and writing a version's copy removes only
// the copies of other versions unused for staleCopy: on tmpfs they hold
// memory, but a jail of another version that is starting one at that
// moment must still find it.
func cachedCopy(dir, name, version string) (string, error) {
	want, err := fs.Stat(embedded, "bin/"+name)
	if err != nil {
		return "", err
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "."+name+"-"+version)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o222 != 0 || st.Size != want.Size() {
			return "", fmt.Errorf("%s: not the copy jail wrote", path)
		}
		if time.Since(time.Unix(st.Mtim.Unix())) > staleCopy/4 {
			_ = unix.UtimesNanoAt(unix.AT_FDCWD, path, nil, unix.AT_SYMLINK_NOFOLLOW)
		}
		return path, nil
	}
	if err := writeCopy(dir, name, path); err != nil {
		return "", err
	}
	return path, nil
}

// staleCopy is how long a copy of a program goes unused before a jail of
// another version may remove it.
const staleCopy = time.Hour

// writeCopy writes the embedded program name to path, then removes the
// copies of its other versions that have gone unused for staleCopy (and
// what an interrupted write left).
func writeCopy(dir, name, path string) error {
	data, err := embedded.ReadFile("bin/" + name)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+"-tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		return errors.Join(werr, cerr)
	}
	// Renamed into place whole: a concurrent jail sees no copy or all of it.
	if err := os.Chmod(tmp.Name(), 0o555); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "."+name+"-*"))
	for _, o := range old {
		if st, err := os.Lstat(o); err == nil && o != path && time.Since(st.ModTime()) > staleCopy {
			_ = os.Remove(o)
		}
	}
	return nil
}

// privateDir makes dir if needed and checks that only this user can write
// it (and so replace the program in it). Others may pass through it: the
// sandboxes' ids must, to execute the program.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: not a directory private to this user", dir)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return err
	}
	if fs.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("%s: mounted noexec", dir)
	}
	return nil
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
