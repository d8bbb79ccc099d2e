package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// The OCI runtime conformance suite (opencontainers/runtime-tools'
// validation programs, run by test/ocisuite as docs/oci-conformance.md
// describes) against jail oci, as a gate of make test.

// ociMustPass are the validation programs jail oci passes on a cgroup v1
// host like CI's: every one runc 1.1 passes here but linux_ns_itype and
// linux_ns_path (a container without a mount namespace of its own, and a
// root built in a joined one, refused by design: docs/oci-conformance.md),
// and the ones jail passes beyond runc. Left out as well are the programs
// whose outcome is the test's race, not the runtime's (pidfile, poststart:
// docs/oci-conformance.md says why).
var ociMustPass = []string{
	"config_updates_without_affect", "create", "default", "delete_only_create_resources", "delete_resources",
	"hooks_stdin", "hostname", "kill", "kill_no_effect", "killsig",
	"linux_cgroups_cpus", "linux_cgroups_devices", "linux_cgroups_pids",
	"linux_cgroups_relative_cpus", "linux_cgroups_relative_devices", "linux_cgroups_relative_pids",
	"linux_devices", "linux_masked_paths", "linux_mount_label", "linux_ns_nopath", "linux_ns_path_type", "linux_readonly_paths",
	"linux_rootfs_propagation", "linux_seccomp", "linux_sysctl", "linux_uid_mappings",
	"misc_props", "mounts", "poststop", "poststop_fail", "prestart_fail",
	"process", "process_capabilities", "process_oom_score_adj", "process_rlimits_fail", "process_user",
	"root_readonly_true", "state",
}

// TestOCIConformance runs the whole suite against jail oci and fails on
// any program of ociMustPass that does not pass, with its reason. The
// table of all programs goes to the test's log.
func TestOCIConformance(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the conformance suite runs as root")
	}
	// ociMustPass is what passes on a v1 host like CI's; the v2 VM runs
	// the suite's programs' subjects in the other OCI tests.
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270 {
		t.Skip("cgroup v2: the conformance gate runs on the v1 host")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the conformance suite is built here with go, which this machine lacks")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := sharedTempDir(t, nil)
	harness := filepath.Join(dir, "ocisuite")
	build := exec.Command("go", "build", "-o", harness, "./ocisuite")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the harness: %v\n%s", err, out)
	}
	runtime := filepath.Join(dir, "jail-runc")
	if err := os.Symlink(jailBin, runtime); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(dir, "tmp")
	// Searchable by all: a container with a user namespace opens its
	// root from inside it, as runc does.
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "results.json")
	cmd := exec.Command(harness, "-runtime", "jail="+runtime, "-cache", filepath.Join(repo, "bin", "oci"), "-json", results)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "TMPDIR="+scratch)
	out, err := cmd.Output()
	t.Logf("ocisuite:\n%s", out)
	// Exit 3 is "a program failed", which the list below judges.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 3) {
		t.Fatalf("ocisuite: %v\n%s", err, exitStderr(err))
	}
	var report struct {
		Results map[string][]struct {
			Test      string   `json:"test"`
			Passed    bool     `json:"passed"`
			Reason    string   `json:"reason"`
			Leftovers []string `json:"leftovers"`
			TAP       struct {
				Failures []struct {
					Description string `json:"description"`
				} `json:"failures"`
			} `json:"tap"`
		} `json:"results"`
	}
	data, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("results: %v", err)
	}
	got := map[string]bool{}
	for _, r := range report.Results["jail"] {
		got[r.Test] = true
		if r.Passed {
			continue
		}
		for _, p := range ociMustPass {
			if p != r.Test {
				continue
			}
			why := r.Reason
			for _, f := range r.TAP.Failures {
				why += "; not ok: " + f.Description
			}
			t.Errorf("%s: failed: %s", r.Test, strings.TrimPrefix(why, "; "))
		}
		// Bundles a program leaves in its TMPDIR are the suite's own
		// (docs/oci-conformance.md); anything else left is jail's.
		for _, l := range r.Leftovers {
			if !strings.Contains(l, "in its TMPDIR") {
				t.Errorf("%s: left behind: %s", r.Test, l)
			}
		}
	}
	var missing []string
	for _, p := range ociMustPass {
		if !got[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the suite has no program %s", strings.Join(missing, ", "))
	}
}

// exitStderr is what a failed command wrote to stderr, when it kept it.
func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
