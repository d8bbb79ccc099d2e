package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/profiles"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, body string
		line       int    // 0: no error expected
		want       string // in the error
	}{
		{"minimal", "version: 1\n", 0, ""},
		{"full", "version: 1\ndescription: d\nlimits: {memory: 1G, cpus: 0.5, pids: 10, scratch: 64M}\nnetwork: none\nmasks: [/a]\nread_only: [/b]\nenv: {A: b}\nseccomp:\n  allow: [read]\n  allow_if:\n    - {syscall: clone, why: w, args: [{index: 0, mask: 1, equals: 0}]}\n  errno:\n    - {syscalls: [bpf], errno: ENOSYS, why: w}\n", 0, ""},
		{"no version", "description: x\n", 1, "version 0"},
		{"future version", "version: 2\n", 1, "version 2"},
		{"unknown field", "version: 1\ncolour: red\n", 2, "field colour not found"},
		{"nested unknown field", "version: 1\nseccomp:\n  allows: [read]\n", 3, "field allows not found"},
		{"bad yaml", "version: 1\nseccomp: [\n", 2, ""},
		{"syscall not a word", "version: 1\nseccomp:\n  allow:\n    - {a: b}\n", 4, "plain word"},
		{"denied syscall not a word", "version: 1\nseccomp:\n  errno:\n    - syscalls:\n        - bpf\n        - [x]\n      why: w\n", 6, "plain word"},
		{"dropped syscall not a word", "version: 1\nseccomp:\n  drop: [read, {x: 1}]\n", 3, "plain word"},
		{"conditional syscall not a word", "version: 1\nseccomp:\n  allow_if:\n    - {syscall: [clone], args: []}\n", 4, "plain word"},
		{"bad errno", "version: 1\nseccomp:\n  errno:\n    - {syscalls: [bpf], errno: EWHAT, why: w}\n", 4, "not an errno"},
		{"argument index", "version: 1\nseccomp:\n  allow_if:\n    - {syscall: clone, args: [{index: 6, equals: 0}]}\n", 4, "argument index 6"},
		{"network", "version: 1\nnetwork: host\n", 2, "none, or allow=RULE"},
		{"network rules", "version: 1\nnetwork: allow=*.com\n", 2, `rule "*.com"`},
		{"relative mask", "version: 1\nmasks: [etc/shadow]\n", 2, "absolute"},
		{"mask with a NUL byte", "version: 1\nmasks: [\"/etc/x\\0y\"]\n", 2, "NUL byte"},
		{"read-only path with a NUL byte", "version: 1\nread_only: [\"/etc/x\\0y\"]\n", 2, "NUL byte"},
		{"bad extends", "version: 1\nextends: ../x\n", 2, "not a profile name"},
		{"empty", "", 0, "empty file"},
	}
	for _, c := range cases {
		_, err := Parse(c.name, "test", []byte(c.body))
		if c.line == 0 && c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var pe *profiles.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v; want a profile error", c.name, err)
			continue
		}
		if pe.Line != c.line || !strings.Contains(pe.Error(), c.want) {
			t.Errorf("%s: %q (line %d); want line %d and %q", c.name, pe.Error(), pe.Line, c.line, c.want)
		}
	}
}

// TestSyscallLines: every syscall records the line it is written on, and
// the profile it is written in, through aliases too.
func TestSyscallLines(t *testing.T) {
	body := `version: 1
seccomp:
  allow:
    - read
    - &w write
  allow_if:
    - syscall: clone
      args: [{index: 0, equals: 1}]
  errno:
    - syscalls: [bpf,
        ptrace]
      why: w
  drop:
    - *w
`
	p, err := Parse("lines", "test", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Seccomp
	got := []profiles.Syscall{s.Allow[0], s.Allow[1], s.AllowIf[0].Syscall, s.Errno[0].Syscalls[0], s.Errno[0].Syscalls[1], s.Drop[0]}
	want := []profiles.Syscall{{Name: "read", Line: 4, From: "lines"}, {Name: "write", Line: 5, From: "lines"}, {Name: "clone", Line: 7, From: "lines"}, {Name: "bpf", Line: 10, From: "lines"}, {Name: "ptrace", Line: 11, From: "lines"}, {Name: "write", Line: 5, From: "lines"}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("syscall %d: %+v; want %+v", i, got[i], want[i])
		}
	}
}

func TestBuiltinsResolve(t *testing.T) {
	for _, name := range []string{"default", "strict", "build"} {
		p, err := Resolve(nil, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(p.Seccomp.Allow) < 200 || p.Limits.Memory == "" {
			t.Errorf("%s resolved to %d allowed syscalls, memory %q", name, len(p.Seccomp.Allow), p.Limits.Memory)
		}
	}
	strict, _ := Resolve(nil, "strict")
	for _, a := range strict.Seccomp.Allow {
		if a.Name == "socket" || a.Name == "ioctl" || a.Name == "process_vm_readv" {
			t.Errorf("strict still allows %s unconditionally", a.Name)
		}
	}
	build, _ := Resolve(nil, "build")
	for _, d := range build.Seccomp.Errno {
		for _, s := range d.Syscalls {
			if s.Name == "ptrace" {
				t.Errorf("build still denies ptrace (line %d of %s)", s.Line, s.From)
			}
		}
	}
}

func TestUserProfiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "version: 1\nextends: b\nenv: {X: a}\nlimits: {pids: 7}\n")
	write("b", "version: 1\nextends: default\nenv: {X: b, Y: b}\nmasks: [/m]\n")
	write("loop1", "version: 1\nextends: loop2\n")
	write("loop2", "version: 1\nextends: loop1\n")
	write("default", "version: 1\nextends: default\ndescription: my default\n")
	user := profiles.Store{Dirs: []string{dir, t.TempDir()}}.Files()
	p, err := Resolve(user, "a")
	if err != nil {
		t.Fatal(err)
	}
	if p.Env["X"] != "a" || p.Env["Y"] != "b" || p.Limits.Pids != 7 || p.Limits.Memory != "512M" || len(p.Masks) != 1 {
		t.Errorf("merged profile: env %v limits %+v masks %v", p.Env, p.Limits, p.Masks)
	}
	if _, err := Resolve(user, "loop1"); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v", err)
	}
	// A user file named after a built-in extends the built-in.
	d, err := Resolve(user, "default")
	if err != nil || d.Description != "my default" || len(d.Seccomp.Allow) < 200 {
		t.Errorf("user default: %v %q", err, d.Description)
	}
	if infos := List(user); len(infos) != 7 {
		t.Errorf("List found %d profiles", len(infos))
	}
}

// TestProfileNetwork: a profile may give the network (none, or the
// gateway's rules), a child inherits it, and a locked network stays locked
// at what it was: a child of strict may narrow it, never widen it.
func TestProfileNetwork(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("egress", "version: 1\nextends: default\nnetwork: allow=pypi.org,**.pythonhosted.org\n")
	write("child", "version: 1\nextends: egress\n")
	write("loosened", "version: 1\nextends: strict\nnetwork: allow=example.com\nnetwork_locked: false\n")
	user := profiles.Store{Dirs: []string{dir}}.Files()
	for _, c := range []struct {
		name, network string
		locked        bool
	}{
		{"egress", "allow=pypi.org,**.pythonhosted.org", false},
		{"child", "allow=pypi.org,**.pythonhosted.org", false},
		{"default", "none", false},
		{"strict", "none", true},
		{"loosened", "none", true},
	} {
		p, err := Resolve(user, c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Network != c.network || p.NetworkLocked != c.locked {
			t.Errorf("%s: network %q locked %v, want %q %v", c.name, p.Network, p.NetworkLocked, c.network, c.locked)
		}
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts renders back.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"default", "strict", "build"} {
		b, _ := profiles.BuiltinFile(name)
		f.Add(b)
	}
	f.Add([]byte("version: 1\nseccomp:\n  allow: [read, {x: 1}]\n"))
	f.Add([]byte("version: 1\nlimits: {memory: [1]}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz", "fuzz", data)
		if err != nil {
			return
		}
		if _, err := Marshal(p); err != nil {
			t.Errorf("Marshal of a parsed profile: %v", err)
		}
	})
}

// TestCapabilities: `capabilities:` takes only the grantable capabilities,
// refuses any other name on its line, tells [] (none) from absent (the
// parent's), and a child's list replaces its parent's.
func TestCapabilities(t *testing.T) {
	refused := []struct {
		name, body string
		line       int
		want       string
	}{
		{"sys_admin", "version: 1\ncapabilities: [CHOWN, SYS_ADMIN]\n", 2, "capability SYS_ADMIN is never given"},
		{"block list", "version: 1\ncapabilities:\n  - CHOWN\n  - CAP_DAC_READ_SEARCH\n", 4, "DAC_READ_SEARCH is never given"},
		{"unknown", "version: 1\ncapabilities: [CHOWN, FLY]\n", 2, `unknown capability "FLY"`},
		{"lower case", "version: 1\ncapabilities: [chown]\n", 2, `unknown capability "chown"`},
		{"null", "version: 1\ncapabilities:\n", 2, "give a list"},
		{"scalar", "version: 1\ncapabilities: CHOWN\n", 2, "cannot unmarshal"},
		{"not a word", "version: 1\ncapabilities: [{a: b}]\n", 2, "cannot unmarshal"},
	}
	for _, name := range []string{"NET_ADMIN", "NET_RAW", "SYS_PTRACE", "SYS_MODULE", "SYS_RAWIO", "BPF", "PERFMON", "SETFCAP", "MKNOD", "SYS_CHROOT", "NET_BIND_SERVICE"} {
		refused = append(refused, struct {
			name, body string
			line       int
			want       string
		}{name, "version: 1\n\ncapabilities: [" + name + "]\n", 3, "capability " + name + " is never given"})
	}
	for _, c := range refused {
		_, err := Parse(c.name, "test", []byte(c.body))
		var pe *profiles.Error
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(pe.Error(), c.want) || !strings.HasPrefix(pe.Error(), "profile "+c.name+": line ") {
			t.Errorf("%s: %v; want line %d and %q", c.name, err, c.line, c.want)
		}
	}

	dir := t.TempDir()
	for name, body := range map[string]string{
		"inherits":     "version: 1\nextends: default\n",
		"narrows":      "version: 1\nextends: default\ncapabilities: [CAP_SETUID, CHOWN, CHOWN]\n",
		"none":         "version: 1\nextends: default\ncapabilities: []\n",
		"grandchild":   "version: 1\nextends: narrows\n",
		"under-strict": "version: 1\nextends: strict\n",
		"widens":       "version: 1\nextends: strict\ncapabilities: [KILL]\n",
		"standalone":   "version: 1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	user := profiles.Store{Dirs: []string{dir}}.Files()
	seven := "CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID"
	for name, want := range map[string]string{
		"default": seven, "build": seven, "strict": "",
		"inherits": seven, "narrows": "CHOWN SETUID", "none": "", "grandchild": "CHOWN SETUID",
		"under-strict": "", "widens": "KILL", "standalone": "",
	} {
		p, err := Resolve(user, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := strings.Join(p.CapabilitySet(), " "); got != want {
			t.Errorf("%s keeps %q; want %q", name, got, want)
		}
		// What `jail profile show` prints says it, [] included.
		out, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case name == "standalone":
			if strings.Contains(string(out), "capabilities") {
				t.Errorf("%s: shown with capabilities it does not have:\n%s", name, out)
			}
		case want == "" && !strings.Contains(string(out), "capabilities: []\n"):
			t.Errorf("%s: shown without `capabilities: []`:\n%s", name, out)
		case want != "" && !strings.Contains(string(out), "capabilities:\n    - "+strings.Fields(want)[0]+"\n"):
			t.Errorf("%s: shown without its capabilities:\n%s", name, out)
		}
	}
	// A profile that reached here by another way than a file (a cache, the
	// tools program's answer) keeps only what may be granted.
	forged := &profiles.Profile{Capabilities: &[]string{"SYS_ADMIN", "CAP_KILL", "DAC_READ_SEARCH"}}
	if got := strings.Join(forged.CapabilitySet(), " "); got != "KILL" {
		t.Errorf("a forged set gives %q; want only KILL", got)
	}
	if got := forged.CapabilityNumbers(); len(got) != 1 || got[0] != 5 {
		t.Errorf("CapabilityNumbers: %v; want [5]", got)
	}
}
