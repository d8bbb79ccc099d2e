package cgroups

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// JanitorArg is argv[0] of the process that removes a sandbox's cgroup when
// its supervisor is gone, whichever way it went.
const JanitorArg = "jail:cgroup-janitor"

// PathsFor returns the directories New(l, name, ...) creates.
func PathsFor(l Layout, name string) []string {
	switch l.Version {
	case V1:
		return v1Paths("/" + Parent + "/" + name)
	case V2:
		return []string{filepath.Join(l.parentDir(), name)}
	}
	return nil
}

// StartJanitor starts a janitor for the cgroup directories dirs. It waits,
// in a session of its own, until the returned file is closed (by the
// supervisor when it is done, or by the kernel when the supervisor dies),
// then removes whatever of dirs is left. wait reaps it.
func StartJanitor(dirs []string) (release *os.File, wait func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{JanitorArg}, dirs...),
		Env:         []string{},
		Stdin:       r,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("start cgroup janitor: %w", err)
	}
	return w, func() { _ = cmd.Wait() }, nil
}

// Janitor is the janitor's stage: it waits for stdin to close, then removes
// the directories named in args, refusing any that is not a cgroup of
// jail's.
func Janitor(args []string) {
	_, _ = io.Copy(io.Discard, os.Stdin)
	var dirs []string
	for _, d := range args {
		if ours(d) {
			dirs = append(dirs, d)
		}
	}
	if err := removeDirs(dirs); err != nil {
		fmt.Fprintln(os.Stderr, "jail: cgroup janitor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ours reports whether dir is a sandbox cgroup: a child of a directory
// named Parent inside the cgroup mount.
func ours(dir string) bool {
	clean := filepath.Clean(dir)
	return clean == dir && strings.HasPrefix(clean, mountpoint+"/") &&
		filepath.Base(filepath.Dir(clean)) == Parent && !strings.Contains(filepath.Base(clean), ".")
}
