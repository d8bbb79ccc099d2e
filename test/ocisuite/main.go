// Command ocisuite runs the OCI runtime conformance suite, the validation
// programs of github.com/opencontainers/runtime-tools, against one or more
// runc-compatible runtimes and prints a Markdown table of the results: one
// row per program, one column per runtime.
//
//	go run ./test/ocisuite -runtime runc=/usr/sbin/runc -runtime crun=/usr/bin/crun \
//		-hide-unified crun -json bin/oci-results.json
//
// The suite is fetched as a Go module (pinned by -version) through the
// module proxy and built from the module cache into -cache/VERSION, once:
// runtimetest (static, copied into every test bundle), the validation
// programs, and the root file system tarball they unpack. Each program is
// started there with RUNTIME set to the runtime's path, as runtime-tools'
// README says, and with a time limit; the harness reads its TAP output
// itself (no node-tap).
//
// Invariants: it runs as root, one program at a time. Every program runs
// in a cgroup of the harness's own at the root of each hierarchy (so what
// a runtime places relative to its caller's cgroup never lands below the
// cgroup the harness was started in) and with TMPDIR in a scratch
// directory of its own. After each program the harness force-deletes the
// containers it left (as the runtime's "list" shows them, where it has
// one), kills the processes left in its cgroup, removes the cgroups left
// below it and the suite's test cgroups at a hierarchy's root
// ("cgrouptest", "testdir") where they appeared while the program ran,
// unmounts what is mounted below the scratch directory and removes that;
// whatever it found is reported. It removes nothing else: root test
// cgroups already there at the start are named in a warning and left alone.
//
// Exit status: 0 when every program passed, 3 when one failed, 1 when the
// harness could not run the suite, 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// defaultVersion is the pinned suite: runtime-tools main of 2025-05-23,
// the newest whose configs say ociVersion 1.1.0 (later ones say 1.3.0,
// which crun 1.8 refuses as an unknown version) and that the module proxy
// serves.
const defaultVersion = "v0.9.1-0.20250523060157-0ea5ed0382a2"

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	runtimes []ociRuntime
	run      *regexp.Regexp
	timeout  time.Duration
	cache    string
	version  string
	jsonFile string
}

func main() {
	if os.Getenv(childEnvProcs) != "" {
		childMain()
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "ocisuite: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A closed stdout or stderr (a pipe's reader gone) must not kill the
	// harness before it has cleaned up: with SIGPIPE notified, such a
	// write fails with EPIPE instead. Unlike ignoring it, this leaves the
	// signal's default action to the runtimes it starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	failed, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ocisuite: %v\n", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(3)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("ocisuite", flag.ContinueOnError)
	var runtimes, hide listFlag
	fs.Var(&runtimes, "runtime", "`NAME=PATH` of a runc-compatible runtime to test (repeatable)")
	fs.Var(&hide, "hide-unified", "run runtime `NAME` with the cgroup v2 hierarchy of a hybrid host unmounted, in a mount namespace of its own (crun 1.8 refuses hybrid layouts; repeatable)")
	runRE := fs.String("run", "", "run only the validation programs whose name matches `REGEXP`")
	o := options{}
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "time limit of one validation program")
	fs.StringVar(&o.cache, "cache", "bin/oci", "`DIR` the built suite is kept in, per version")
	fs.StringVar(&o.version, "version", defaultVersion, "runtime-tools module `VERSION`")
	fs.StringVar(&o.jsonFile, "json", "", "write the raw results to `FILE`")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if len(runtimes) == 0 {
		return o, errors.New("no -runtime NAME=PATH given")
	}
	hidden := map[string]bool{}
	for _, h := range hide {
		hidden[h] = true
	}
	seen := map[string]bool{}
	for _, spec := range runtimes {
		name, path, ok := strings.Cut(spec, "=")
		if !ok || name == "" || path == "" || strings.ContainsAny(name, "/ |") {
			return o, fmt.Errorf("-runtime %q: want NAME=PATH", spec)
		}
		if seen[name] {
			return o, fmt.Errorf("-runtime %q: %s given twice", spec, name)
		}
		seen[name] = true
		// The programs run elsewhere and look RUNTIME up in PATH: give
		// them an absolute path.
		abs, err := exec.LookPath(path)
		if err == nil {
			abs, err = filepath.Abs(abs)
		}
		if err != nil {
			return o, fmt.Errorf("-runtime %s: %w", name, err)
		}
		o.runtimes = append(o.runtimes, ociRuntime{Name: name, Path: abs, HideUnified: hidden[name]})
		delete(hidden, name)
	}
	for h := range hidden {
		return o, fmt.Errorf("-hide-unified %s: no such -runtime", h)
	}
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			return o, fmt.Errorf("-run: %w", err)
		}
		o.run = re
	}
	if o.timeout <= 0 {
		return o, errors.New("-timeout must be positive")
	}
	return o, nil
}

// run builds the suite, runs it for every runtime and reports; failed is
// whether any program failed.
func run(ctx context.Context, o options) (failed bool, err error) {
	if os.Geteuid() != 0 {
		return false, errors.New("needs root: the suite creates containers with cgroups and mounts")
	}
	for _, rt := range o.runtimes {
		if rt.HideUnified && !isV2(unifiedDir) {
			return false, fmt.Errorf("-hide-unified %s: no cgroup v2 hierarchy of a hybrid host at %s", rt.Name, unifiedDir)
		}
	}
	s, err := buildSuite(ctx, o.cache, o.version, os.Stderr)
	if err != nil {
		return false, err
	}
	var tests []string
	for _, t := range s.Tests {
		if o.run == nil || o.run.MatchString(t) {
			tests = append(tests, t)
		}
	}
	if len(tests) == 0 {
		return false, fmt.Errorf("-run %s matches no program of %s", o.run, strings.Join(s.Tests, " "))
	}

	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	jar, err := newCgroupJar()
	if err != nil {
		return false, err
	}
	defer jar.remove()
	for _, d := range jar.rootTestCgroups() {
		fmt.Fprintf(os.Stderr, "ocisuite: warning: %s exists already: it is left alone, and a runtime that leaves it behind is not seen\n", d)
	}
	tmpRoot, err := os.MkdirTemp("", "ocisuite-")
	if err != nil {
		return false, err
	}
	defer func() {
		if left := unmountBelow(tmpRoot); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "ocisuite: still mounted, %s kept: %s\n", tmpRoot, strings.Join(left, ", "))
			return
		}
		os.RemoveAll(tmpRoot)
	}()
	if err := os.Chmod(tmpRoot, 0o755); err != nil {
		return false, err
	}

	r := &runner{suite: s, jar: jar, tmpRoot: tmpRoot, timeout: o.timeout, self: self, noList: map[string]bool{}}
	// Whatever the last command through the wrapper left goes before the
	// jar's cgroups do (removing a cgroup with a task in it fails).
	defer func() {
		for _, left := range jar.sweep(jar.existing()) {
			fmt.Fprintf(os.Stderr, "ocisuite: left at the end, removed: %s\n", left)
		}
	}()
	rep := report{
		Suite:   suiteModule + "@" + o.version,
		Machine: machine(),
		Tests:   tests,
		Seconds: map[string]float64{},
		Results: map[string][]testResult{},
	}
	for _, rt := range o.runtimes {
		rt.Version = r.version(ctx, rt)
		rep.Runtimes = append(rep.Runtimes, rt)
		start := time.Now()
		for _, test := range tests {
			if ctx.Err() != nil {
				break
			}
			res := r.run(ctx, rt, test)
			rep.Results[rt.Name] = append(rep.Results[rt.Name], res)
			failed = failed || !res.Passed
			fmt.Fprintf(os.Stderr, "ocisuite: %s %s: %s (%.1fs)\n", rt.Name, test, cell(res), res.Seconds)
		}
		rep.Seconds[rt.Name] = time.Since(start).Seconds()
	}

	if o.jsonFile != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return failed, err
		}
		if err := os.WriteFile(o.jsonFile, append(b, '\n'), 0o644); err != nil {
			return failed, err
		}
	}
	writeMarkdown(os.Stdout, rep)
	return failed, ctx.Err()
}

// machine describes the host for the report: distribution, kernel and
// cgroup layout.
func machine() string {
	distro := "Linux"
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				distro = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/etc/debian_version"); err == nil {
		distro += " (" + strings.TrimSpace(string(b)) + ")"
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	layout := "cgroup v1"
	switch {
	case isV2(cgroupRoot):
		layout = "cgroup v2"
	case isV2(unifiedDir):
		layout = "cgroup v1 (hybrid)"
	}
	return fmt.Sprintf("%s, kernel %s, %s", distro, unix.ByteSliceToString(u.Release[:]), layout)
}
