package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ociRuntime is one runtime under test: a runc-compatible command line.
type ociRuntime struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// HideUnified runs it with the cgroup v2 hierarchy of a hybrid host
	// unmounted (see childMain).
	HideUnified bool `json:"hideUnified,omitempty"`
	// Version is the first line of its --version.
	Version string `json:"version,omitempty"`
}

// testResult is one validation program's run against one runtime.
type testResult struct {
	Test     string    `json:"test"`
	Runtime  string    `json:"runtime"`
	Passed   bool      `json:"passed"`
	Reason   string    `json:"reason,omitempty"` // why not passed, when the TAP counts do not say
	ExitCode int       `json:"exitCode"`         // -1: killed (time limit)
	Seconds  float64   `json:"seconds"`
	TAP      tapResult `json:"tap"`
	// Leftovers are what the harness found and removed after the program
	// ended: containers, processes, cgroups, mounts, bundle directories.
	Leftovers []string `json:"leftovers,omitempty"`
	Stdout    string   `json:"stdout"`
	Stderr    string   `json:"stderr,omitempty"`
}

// runner runs validation programs one at a time.
type runner struct {
	suite   suite
	jar     *cgroupJar
	tmpRoot string // the run's scratch directory; each program gets its own below
	timeout time.Duration
	self    string // this executable, started as the wrapper
	// noList names the runtimes whose "list -q" failed once: not asked
	// again (a runtime need not have it, and one that hangs costs
	// auxTimeout a call).
	noList map[string]bool
}

// auxTimeout bounds each command the harness itself gives a runtime
// (--version, list, delete --force): a hanging runtime must not hang it.
const auxTimeout = 30 * time.Second

// maxStderr bounds the standard error kept per program.
const maxStderr = 16 * 1024

// run runs one program against one runtime and cleans up after it.
func (r *runner) run(ctx context.Context, rt ociRuntime, test string) testResult {
	res := testResult{Test: test, Runtime: rt.Name}
	before := r.containers(ctx, rt)
	hadRoot := r.jar.existing()

	scratch, err := os.MkdirTemp(r.tmpRoot, rt.Name+"-"+test+"-")
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	tmp := filepath.Join(scratch, "tmp")
	// Searchable by all: a container whose root is mapped to another
	// user must reach its bundle below these directories.
	if err := os.Chmod(scratch, 0o755); err != nil {
		res.Reason = err.Error()
		return res
	}
	stdoutPath, stderrPath := filepath.Join(scratch, "stdout"), filepath.Join(scratch, "stderr")
	stdout, err1 := os.Create(stdoutPath)
	stderr, err2 := os.Create(stderrPath)
	if err := errors.Join(err1, err2, os.Mkdir(tmp, 0o755)); err != nil {
		res.Reason = err.Error()
		return res
	}

	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	cmd := r.wrapped(tctx, rt, r.suite.program(test))
	cmd.Dir = r.suite.Dir
	cmd.Env = append(cmd.Env, "RUNTIME="+rt.Path, "TMPDIR="+tmp)
	// Files, not pipes: a process the program leaves behind holding its
	// output must not keep the harness waiting.
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err = cmd.Run()
	res.Seconds = time.Since(start).Seconds()
	stdout.Close()
	stderr.Close()
	res.ExitCode = cmd.ProcessState.ExitCode()

	out, _ := os.ReadFile(stdoutPath)
	errOut, _ := os.ReadFile(stderrPath)
	res.Stdout = string(out)
	if len(errOut) > maxStderr {
		errOut = append([]byte("..."), errOut[len(errOut)-maxStderr:]...)
	}
	res.Stderr = string(errOut)
	res.TAP = parseTAP(out)

	// Clean up before judging, even when interrupted: containers first
	// (their runtime knows how), then whatever is left in the cgroups, then
	// mounts, then files.
	res.Leftovers = append(res.Leftovers, r.removeContainers(context.WithoutCancel(ctx), rt, before)...)
	res.Leftovers = append(res.Leftovers, r.jar.sweep(hadRoot)...)
	res.Leftovers = append(res.Leftovers, unmountBelow(scratch)...)
	if entries, err := os.ReadDir(tmp); err == nil && len(entries) > 0 {
		res.Leftovers = append(res.Leftovers, fmt.Sprintf("%d file(s) in its TMPDIR (bundles the program did not remove)", len(entries)))
	}
	if left := unmountBelow(scratch); len(left) == 0 {
		if err := os.RemoveAll(scratch); err != nil {
			res.Leftovers = append(res.Leftovers, "cannot remove "+scratch+": "+err.Error())
		}
	} else {
		res.Leftovers = append(res.Leftovers, "still mounted, not removed: "+strings.Join(left, ", "))
	}

	res.Passed, res.Reason = judge(res, err, tctx.Err(), r.timeout)
	return res
}

// judge decides whether a program passed: every test point ok (skips
// allowed), as many as planned, and a clean exit.
func judge(res testResult, runErr, ctxErr error, timeout time.Duration) (bool, string) {
	t := res.TAP
	switch {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		return false, fmt.Sprintf("timed out after %v", timeout)
	case ctxErr != nil:
		return false, "interrupted"
	case t.BailOut != "":
		return false, "bail out: " + t.BailOut
	case t.Plan < 0 && t.points() == 0 && runErr == nil:
		// The "_fail" programs print nothing: their exit status is the
		// verdict.
		return true, ""
	case t.Plan < 0:
		why := "no TAP plan"
		if runErr != nil {
			why += ", " + runErr.Error()
		}
		if line := stderrReason(res.Stderr); line != "" {
			why += ": " + line
		}
		return false, why
	case t.points() == 0 && t.Error != "":
		return false, "no test point, error: " + t.Error
	case t.Plan != t.points():
		return false, fmt.Sprintf("planned %d test points, reported %d", t.Plan, t.points())
	case runErr != nil:
		why := runErr.Error()
		if line := stderrReason(res.Stderr); line != "" {
			why += ": " + line
		}
		return false, why
	case t.Fail > 0:
		return false, ""
	}
	return true, ""
}

// wrapped is a command started through the wrapper, inside the jar.
func (r *runner) wrapped(ctx context.Context, rt ociRuntime, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.self, append([]string{path}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), childEnvProcs+"="+r.jar.procsFiles())
	if rt.HideUnified {
		cmd.Env = append(cmd.Env, childEnvHide+"=1")
	}
	return cmd
}

// containers lists the runtime's containers ("list -q"); nil when the
// runtime has no list command, which a runtime need not have.
func (r *runner) containers(ctx context.Context, rt ociRuntime) map[string]bool {
	if r.noList[rt.Name] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, auxTimeout)
	defer cancel()
	out, err := r.wrapped(ctx, rt, rt.Path, "list", "-q").Output()
	if err != nil {
		r.noList[rt.Name] = true
		return nil
	}
	ids := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		ids[id] = true
	}
	return ids
}

// version is the first line of the runtime's --version, or "".
func (r *runner) version(ctx context.Context, rt ociRuntime) string {
	ctx, cancel := context.WithTimeout(ctx, auxTimeout)
	defer cancel()
	out, err := r.wrapped(ctx, rt, rt.Path, "--version").Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first
}

// removeContainers force-deletes the containers a program left.
func (r *runner) removeContainers(ctx context.Context, rt ociRuntime, before map[string]bool) []string {
	if before == nil {
		return nil
	}
	var left []string
	for id := range r.containers(ctx, rt) {
		if before[id] {
			continue
		}
		left = append(left, "container "+id)
		cctx, cancel := context.WithTimeout(ctx, auxTimeout)
		if out, err := r.wrapped(cctx, rt, rt.Path, "delete", "--force", id).CombinedOutput(); err != nil {
			left = append(left, fmt.Sprintf("delete --force %s: %v: %s", id, err, strings.TrimSpace(string(out))))
		}
		cancel()
	}
	sort.Strings(left)
	return left
}

// unmountBelow detaches every mount at or below dir in the harness's
// mount namespace (a bundle's rootfs a runtime mounted and left), deepest
// first, and returns those it could not.
func unmountBelow(dir string) []string {
	var left []string
	for _, mp := range mountsBelow(dir) {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			left = append(left, mp)
		}
	}
	return left
}

// mountsBelow lists the mount points at or below dir, deepest first.
func mountsBelow(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{"cannot read mountinfo: " + err.Error()}
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(a, b int) bool { return len(mps[a]) > len(mps[b]) })
	return mps
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// logPrefix is runc's log line prefix, which says nothing in a reason.
var logPrefix = regexp.MustCompile(`^time="[^"]*" level=\w+ msg=`)

// stderrReason is the last line of a program's standard error that says
// why it failed: not its closing "exit status N".
func stderrReason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "exit status ") || strings.HasPrefix(line, "Refer to: ") {
			continue
		}
		return logPrefix.ReplaceAllString(line, "")
	}
	return ""
}
