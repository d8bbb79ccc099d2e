package programs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp"
)

// toolsFDEnv names the descriptor of the tools program that jail hands
// the server program across the exec that makes it (ExecServer): the
// server embeds only the tools program's version, not its 19 MB, and runs
// it for image pulls and user profiles.
const toolsFDEnv = "JAIL_TOOLS_FD"

// handedTools is the tools program jail handed the server program
// (AdoptTools), set once as the server starts, before it starts anything;
// nil in every other program, which runs its own.
var handedTools *os.File

// ExecServer is Exec(Server, argv) with the tools program, opened and
// checked here, handed over: its descriptor stays open through the exec,
// and $JAIL_TOOLS_FD names it. Without one (where it cannot be opened) the
// server still serves, and what needs the tools program fails saying why.
func ExecServer(argv []string) error {
	env := make([]string, 0, len(os.Environ())+1)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, toolsFDEnv+"=") {
			env = append(env, e)
		}
	}
	if t, err := Open(Tools); err == nil {
		defer t.Close() // and kept open until the exec
		fd := t.file.Fd()
		if _, err := unix.FcntlInt(fd, unix.F_SETFD, 0); err == nil {
			env = append(env, toolsFDEnv+"="+strconv.Itoa(int(fd)))
		}
	}
	return execWith(Server, argv, env)
}

// AdoptTools takes the tools program ExecServer handed over, if any, as
// the one Open(Tools) returns: the server program calls it first thing.
// The variable is removed from the environment and the descriptor made
// close-on-exec again, so that nothing the server starts inherits either.
func AdoptTools() {
	v, ok := os.LookupEnv(toolsFDEnv)
	if !ok {
		return
	}
	os.Unsetenv(toolsFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, memfdFD)
	unix.Close(fd)
	if err != nil {
		return
	}
	handedTools = os.NewFile(uintptr(high), "tools")
}

// RunTools runs the tools program with args and the given stdio and
// returns its exit status.
func RunTools(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return RunToolsWithFiles(args, nil, stdin, stdout, stderr)
}

// RunToolsWithFiles is RunTools handing the tools program files as its
// descriptors 3, 4, ...: what it is to act on that its caller opened
// (`jail-tools oci devices` gets the cgroup directory it sets the device
// program of), so that the tools program never opens a path again. The
// files stay the caller's; the program's descriptor is moved above those
// the child's setup writes to (Program.PathFor).
func RunToolsWithFiles(args []string, files []*os.File, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	p, err := Open(Tools)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	path, err := p.PathFor(len(files))
	if err != nil {
		return 0, fmt.Errorf("tools program: %w", err)
	}
	// The tools program dies with its caller, as if it were the caller:
	// an import killed midway must not go on writing. The parent-death
	// signal follows the thread that started the child, so that thread
	// stays for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{
		Path: path, Args: append([]string{"jail-tools"}, args...),
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	return exitStatus(cmd.Run())
}

// exitStatus is the exit status of the tools program that ended with err
// (exec.Cmd's Run or Wait), or why it could not be run.
func exitStatus(err error) (int, error) {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("tools program: %w", err)
	}
	return 0, nil
}

// RunToolsMapped is RunTools for image commands of a rootless caller with
// subordinate ids (id: namespaces.ForCaller's identity for sandbox root,
// id.SubIDs set): the tools program starts in a user namespace of its own
// that id's maps are written to (by newuidmap and newgidmap), as root
// there with the capabilities over files that it needs (storeCaps), so
// that it stores layers with their owners among the subordinate ids and
// can remove them again (images.Ownership.SubIDs). It is started as
// `jail-tools mapped ARGS...` and waits on descriptor 3 until its maps are
// written. Three process starts: the program and the two helpers.
func RunToolsMapped(id namespaces.Identity, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if !id.SubIDs {
		return 0, errors.New("tools program: no subordinate ids to map")
	}
	p, err := Open(Tools)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	ready, release, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("tools program: %w", err)
	}
	defer release.Close()
	runtime.LockOSThread() // the parent-death signal follows this thread
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{
		Path: p.Path, Args: append([]string{"jail-tools", "mapped"}, args...),
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		ExtraFiles:  []*os.File{ready},
		SysProcAttr: namespaces.UserNSAttr(storeCaps),
	}
	err = cmd.Start()
	ready.Close()
	if err != nil {
		return 0, fmt.Errorf("tools program: %w", err)
	}
	if err := id.MapIDs(cmd.Process.Pid); err != nil {
		release.Close() // the program sees no go-ahead and exits
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("mapping your subordinate ids for the image store: %w", err)
	}
	if _, err := release.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("tools program: %w", err)
	}
	release.Close()
	return exitStatus(cmd.Wait())
}

// storeCaps are what the tools program needs in its user namespace to
// store and remove layers whose files belong to several owners: give them
// their owners and modes and reach and remove them whatever their modes
// (no capability to make devices, mount or switch ids). The kernel confines
// each to files whose owners the namespace maps.
var storeCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_FSETID}

// ProfileResolver resolves and compiles user profiles in the tools program,
// which links the YAML reader and libseccomp. Its identity, part of the
// cache key, is the tools program's version, which covers both and the
// built-in profiles a user profile may extend.
func ProfileResolver() seccomp.Resolver {
	return seccomp.Resolver{Identity: "tools " + Version(Tools), Resolve: resolveInTools}
}

func resolveInTools(user profiles.Files, name string) (*profiles.Profile, seccomp.Filter, error) {
	in, err := json.Marshal(seccomp.ResolveRequest{Name: name, Files: user})
	if err != nil {
		return nil, seccomp.Filter{}, err
	}
	var out, stderr bytes.Buffer
	code, err := RunTools([]string{"profile", "resolve"}, bytes.NewReader(in), &out, &stderr)
	if err != nil {
		return nil, seccomp.Filter{}, err
	}
	if code != 0 {
		var re seccomp.ResolveError
		if json.Unmarshal(out.Bytes(), &re) != nil || re.Message == "" {
			return nil, seccomp.Filter{}, fmt.Errorf("tools program: profile resolve: status %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
		}
		if re.Profile != "" {
			return nil, seccomp.Filter{}, &profiles.Error{Profile: re.Profile, Line: re.Line, Err: errors.New(re.Message)}
		}
		return nil, seccomp.Filter{}, errors.New(re.Message)
	}
	var r seccomp.Resolved
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Profile == nil || !r.Filter.Valid() {
		return nil, seccomp.Filter{}, fmt.Errorf("tools program: profile resolve: not a resolved profile")
	}
	return r.Profile, r.Filter, nil
}
