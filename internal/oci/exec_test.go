package oci

import (
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestExecProcessAppArmorProfile: an exec'd process runs under the
// container's AppArmor profile unless it names its own, with --process
// (which containerd's shim always passes) as with the command line, as
// runc's exec runs it: a --process without the field must not run
// unconfined in a confined container.
func TestExecProcessAppArmorProfile(t *testing.T) {
	base := &specs.Process{Args: []string{"sleep", "1000"}, Cwd: "/", ApparmorProfile: "containers"}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		process string // --process's file, "" for the command line
		flag    string // --apparmor
		want    string
	}{
		{"command line, the container's", "", "", "containers"},
		{"command line, --apparmor", "", "other", "other"},
		{"--process without a profile, the container's", `{"args":["true"],"cwd":"/"}`, "", "containers"},
		{"--process with its own profile", `{"args":["true"],"cwd":"/","apparmorProfile":"own"}`, "", "own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ExecOptions{Args: []string{"true"}, AppArmor: tc.flag}
			if tc.process != "" {
				o.ProcessFile = filepath.Join(dir, "process.json")
				if err := os.WriteFile(o.ProcessFile, []byte(tc.process), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p, err := execProcess(o, base)
			if err != nil {
				t.Fatal(err)
			}
			if p.ApparmorProfile != tc.want {
				t.Errorf("profile %q, want %q", p.ApparmorProfile, tc.want)
			}
		})
	}
}
