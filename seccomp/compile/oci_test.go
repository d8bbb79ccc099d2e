package compile

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/seccomp/filter"
)

func uintp(v uint) *uint { return &v }

// ociPolicy allows everything but getppid (EACCES), and personality unless
// its argument is 0 or 8 (two conditions on one argument: ORed).
func ociPolicy() *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchAARCH64},
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"getppid", "no_such_syscall_anywhere"}, Action: specs.ActErrno, ErrnoRet: uintp(uint(unix.EACCES))},
			{Names: []string{"personality"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{
				{Index: 0, Op: specs.OpGreaterThan, Value: 8},
				{Index: 0, Op: specs.OpMaskedEqual, Value: 0xff, ValueTwo: 0x3},
			}},
			{Names: []string{"getpid"}, Action: specs.ActAllow}, // the default: skipped
		},
	}
}

const ociChildEnv = "JAIL_TEST_OCI_SECCOMP_CHILD"

// TestOCIFilterDoesWhatThePolicySays loads the compiled filter in a child
// and tries the syscalls.
func TestOCIFilterDoesWhatThePolicySays(t *testing.T) {
	if os.Getenv(ociChildEnv) != "" {
		ociChild()
		return
	}
	f, err := CompileOCI(ociPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if !f.Valid() || f.Denials != nil {
		t.Fatalf("%d+%d bytes", len(f.Allowlist), len(f.Denials))
	}
	data, _ := json.Marshal(f)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOCIFilterDoesWhatThePolicySays$")
	cmd.Env = append(os.Environ(), ociChildEnv+"="+string(data))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "getppid EACCES; personality(0) ok; personality(9) EPERM; personality(3) EPERM") {
		t.Errorf("child: %s", out)
	}
}

func ociChild() {
	var f filter.Filter
	if err := json.Unmarshal([]byte(os.Getenv(ociChildEnv)), &f); err != nil {
		panic(err)
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	if err := filter.Load(f); err != nil {
		panic(err)
	}
	report := func(err error) string {
		if err == nil || err == unix.Errno(0) {
			return "ok"
		}
		return unix.ErrnoName(err.(unix.Errno))
	}
	_, _, e1 := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
	_, _, e3 := unix.RawSyscall(unix.SYS_PERSONALITY, 9, 0, 0)
	_, _, e4 := unix.RawSyscall(unix.SYS_PERSONALITY, 3, 0, 0)
	_, _, e5 := unix.RawSyscall(unix.SYS_PERSONALITY, 0, 0, 0)
	os.Stdout.WriteString("getppid " + report(e1) + "; personality(0) " + report(e5) + "; personality(9) " + report(e3) + "; personality(3) " + report(e4) + "\n")
	os.Exit(0)
}

func TestCompileOCIRefuses(t *testing.T) {
	cases := []struct {
		policy *specs.LinuxSeccomp
		want   string
	}{
		{&specs.LinuxSeccomp{DefaultAction: specs.ActNotify}, `action "SCMP_ACT_NOTIFY" is not supported`},
		{&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_LOG"}}, "flags"},
		{&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{"SCMP_ARCH_VAX"}}, "architecture SCMP_ARCH_VAX"},
		{&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: uintp(5000)}, "is not an errno"},
		{&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
			{Names: []string{"kill"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 0, Op: "SCMP_CMP_SOMETIMES"}}},
		}}, "operator"},
	}
	for _, c := range cases {
		if _, err := CompileOCI(c.policy); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.policy, err, c.want)
		}
	}
}
