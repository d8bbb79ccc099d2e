package devices

import (
	"os"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
)

// none (-2) leaves a major or minor out of a rule.
const none = -2

func rule(allow bool, typ string, major, minor int64, access string) specs.LinuxDeviceCgroup {
	r := specs.LinuxDeviceCgroup{Allow: allow, Type: typ, Access: access}
	if major != none {
		r.Major = &major
	}
	if minor != none {
		r.Minor = &minor
	}
	return r
}

func TestDeviceProgramRefusesBadRules(t *testing.T) {
	for _, r := range []specs.LinuxDeviceCgroup{
		rule(true, "u", 1, 3, "rwm"), rule(true, "c", 1, 3, "rwx"), rule(true, "c", -3, 3, "r"),
		rule(true, "c", 1<<32, 3, "r"), rule(true, "c", 1, 1<<40, "r"),
	} {
		if _, err := Program([]specs.LinuxDeviceCgroup{r}); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// TestDeviceProgramSetRefusesWhatIsNoV2Cgroup: Set acts only on a
// descriptor of a cgroup v2 directory, and refuses too many rules, before
// it loads anything (so this needs neither root nor cgroup v2).
func TestDeviceProgramSetRefusesWhatIsNoV2Cgroup(t *testing.T) {
	ok := []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "rwm")}
	dir := t.TempDir()
	file := dir + "/file"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{dir: "not of a cgroup v2 directory", file: "not of a directory"} {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = Set(fd, ok)
		unix.Close(fd)
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %v; want %q", path, err, want)
		}
	}
	if err := Set(-1, ok); err == nil {
		t.Errorf("no descriptor: accepted")
	}
	huge := make([]specs.LinuxDeviceCgroup, devicerules.MaxRules+1)
	for i := range huge {
		huge[i] = rule(true, "c", 1, int64(i), "r")
	}
	if err := Set(-1, huge); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d rules: %v", len(huge), err)
	}
}

// TestTheProgramOfTheMostRulesLoads: a bundle of as many rules as jail
// takes, each testing every field, gets a program the kernel's verifier
// accepts (a jump on a field itself made it tell apart states that
// multiplied, and refused a few hundred rules).
func TestTheProgramOfTheMostRulesLoads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load a BPF program")
	}
	rules := []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm")}
	for i := 1; i < devicerules.MaxRules; i++ {
		rules = append(rules, rule(i%3 != 0, []string{"c", "b", "a"}[i%3], int64(i%300), int64(i), []string{"r", "w", "m", "rw", "rwm"}[i%5]))
	}
	prog, err := Load(rules)
	if err != nil {
		t.Fatal(err)
	}
	prog.Close()
}
