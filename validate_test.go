package jail

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateChecks: each rule of validate refuses what it names, with a
// Refused SetupError naming the option at fault, and lets the nearest valid
// value through; every rule in specChecks has its cases here. validate
// reads nothing from the host, so none of these starts anything.
func TestValidateChecks(t *testing.T) {
	cmd := []string{"true"}
	long := strings.Repeat("a", maxArgBytes+1)
	var manyMounts []Mount
	for i := 0; i < maxMounts; i++ {
		manyMounts = append(manyMounts, Mount{Source: "/srv", Destination: "/m"})
	}
	cases := []struct {
		check, behaviour string
		spec             Spec
		step             string // "" means valid
	}{
		{"root", "an image and a root directory exclude each other", Spec{Image: "i", Rootfs: "/r"}, "--image"},
		{"root", "an image alone is a root", Spec{Image: "i"}, ""},
		{"image", "a reference with a registry and a port", Spec{Image: "localhost:5000/a/b:1"}, ""},
		{"image", "what no reference is", Spec{Image: "Not A Reference"}, "image Not A Reference"},
		{"image", "a URL is no reference", Spec{Image: "http://localhost:5000/a:1"}, "image http://localhost:5000/a:1"},
		{"image", "each pull policy", Spec{Image: "i", Pull: PullAlways}, ""},
		{"image", "an unknown pull policy", Spec{Image: "i", Pull: "sometimes"}, "--pull"},
		{"command", "no command and no image is refused", Spec{}, "run"},
		{"command", "an image may give the command", Spec{Image: "i"}, ""},
		{"net", "a network other than none is refused", Spec{Command: cmd, Net: "host"}, "--net"},
		{"net", "none is loopback only", Spec{Command: cmd, Net: "none"}, ""},
		{"secrets", "a secret's name is a variable's", Spec{Command: cmd, Secrets: []string{"API_TOKEN"}}, ""},
		{"secrets", "a secret's name that is no variable's", Spec{Command: cmd, Secrets: []string{"not-a-name"}}, "--secret not-a-name"},
		{"net", "allow= with rules is the gateway's", Spec{Command: cmd, Net: "allow=example.com,*.example.org:8443"}, ""},
		{"net", "allow= alone denies everything, on record", Spec{Command: cmd, Net: "allow="}, ""},
		{"net", "a line break in the rules", Spec{Command: cmd, Net: "allow=a.com\nb.com"}, "--net"},
		{"net limits", "limits without the gateway", Spec{Command: cmd, NetLimits: NetLimits{MaxConns: 4}}, "--net-limit"},
		{"net limits", "limits with the gateway", Spec{Command: cmd, Net: "allow=a.com", NetLimits: NetLimits{MaxConns: 4, MaxBytes: 1 << 20, Rate: 1 << 10}}, ""},
		{"net limits", "too many connections", Spec{Command: cmd, Net: "allow=a.com", NetLimits: NetLimits{MaxConns: 1 << 20}}, "--net-limit"},
		{"secrets", "a secret bound to hosts needs the gateway", Spec{Command: cmd, Net: "none", Secrets: []string{"TOKEN@api.example"}}, "--secret TOKEN@api.example"},
		{"secrets", "a secret bound to hosts with the gateway", Spec{Command: cmd, Net: "allow=api.example", Secrets: []string{"TOKEN@api.example,b.example"}}, ""},
		{"secrets", "a bound host with a port", Spec{Command: cmd, Net: "allow=api.example", Secrets: []string{"TOKEN@api.example:443"}}, "--secret TOKEN@api.example:443"},
		{"secrets", "a bound secret also set by --env", Spec{Command: cmd, Net: "allow=api.example", Secrets: []string{"TOKEN@api.example"}, Env: []string{"TOKEN=x"}}, "--secret TOKEN@api.example"},
		{"secrets", "a secret given twice", Spec{Command: cmd, Secrets: []string{"TOKEN", "TOKEN"}}, "--secret TOKEN"},
		{"memory", "less than 4M is refused", Spec{Command: cmd, Memory: 4<<20 - 1}, "--memory"},
		{"memory", "a negative size is refused", Spec{Command: cmd, Memory: -1}, "--memory"},
		{"memory", "4M is the least", Spec{Command: cmd, Memory: 4 << 20}, ""},
		{"cpus", "a negative quota is refused", Spec{Command: cmd, CPUs: -1}, "--cpus"},
		{"cpus", "more than 1024 cores is refused", Spec{Command: cmd, CPUs: 1024.5}, "--cpus"},
		{"cpus", "1024 cores is the most", Spec{Command: cmd, CPUs: 1024}, ""},
		{"pids", "a negative count is refused", Spec{Command: cmd, Pids: -1}, "--pids"},
		{"pids", "more than the kernel's most is refused", Spec{Command: cmd, Pids: maxPids + 1}, "--pids"},
		{"pids", "the kernel's most is allowed", Spec{Command: cmd, Pids: maxPids}, ""},
		{"timeout", "a negative timeout is refused", Spec{Command: cmd, Timeout: -time.Second}, "--timeout"},
		{"output limit", "a negative limit is refused", Spec{Command: cmd, OutputLimit: -1}, "--output-limit"},
		{"output limit", "more than the most is refused", Spec{Command: cmd, OutputLimit: MaxOutputLimit + 1}, "--output-limit"},
		{"output limit", "the most is allowed", Spec{Command: cmd, OutputLimit: MaxOutputLimit}, ""},
		{"user", "a user name is refused", Spec{Command: cmd, User: "nobody"}, "--user"},
		{"user", "a group name is refused", Spec{Command: cmd, User: "1000:staff"}, "--user"},
		{"user", "UID:GID in numbers", Spec{Command: cmd, User: "1000:1000"}, ""},
		{"hostname", "a name with a slash is refused", Spec{Command: cmd, Hostname: "a/b"}, "--hostname"},
		{"hostname", "a name ending in '-' is refused", Spec{Command: cmd, Hostname: "a-"}, "--hostname"},
		{"hostname", "a name longer than 64 is refused", Spec{Command: cmd, Hostname: strings.Repeat("a", maxHostname+1)}, "--hostname"},
		{"hostname", "letters, digits, '-' and '.'", Spec{Command: cmd, Hostname: "build-1.local"}, ""},
		{"env", "an entry without '=' is refused", Spec{Command: cmd, Env: []string{"A"}}, "--env A"},
		{"env", "a name starting with a digit is refused", Spec{Command: cmd, Env: []string{"1A=x"}}, "--env 1A"},
		{"env", "a value with a NUL byte is refused", Spec{Command: cmd, Env: []string{"A=x\x00y"}}, "--env A"},
		{"env", "an entry longer than an exec takes is refused", Spec{Command: cmd, Env: []string{"A=" + long}}, "--env A"},
		{"env", "an empty value is a value", Spec{Command: cmd, Env: []string{"A="}}, ""},
		{"mounts", "more than 64 mounts with the workspace is refused", Spec{Command: cmd, Workspace: "/w", Mounts: manyMounts}, "--mount"},
		{"mounts", "64 mounts is the most", Spec{Command: cmd, Mounts: manyMounts}, ""},
		{"mounts", "a relative source is refused", Spec{Command: cmd, Mounts: []Mount{{Source: "src", Destination: "/d"}}}, "--mount src"},
		{"mounts", "a relative workspace is refused", Spec{Command: cmd, Workspace: "w"}, "--workspace w"},
		{"mounts", "a destination leaving the root is refused", Spec{Command: cmd, Mounts: []Mount{{Source: "/s", Destination: "/a/../../b"}}}, "--mount /s"},
		{"mounts", "a destination replacing the root is refused", Spec{Command: cmd, Mounts: []Mount{{Source: "/s", Destination: "/"}}}, "--mount /s"},
		{"mounts", "a destination in /proc is refused", Spec{Command: cmd, Mounts: []Mount{{Source: "/s", Destination: "/proc/x"}}}, "--mount /s"},
		{"workdir", "a relative working directory is refused", Spec{Command: cmd, Workdir: "src"}, "--workdir"},
		{"workdir", "a working directory in /sys is refused", Spec{Command: cmd, Workdir: "/sys/fs"}, "--workdir"},
		{"workdir", "a working directory with a NUL byte is refused", Spec{Command: cmd, Workdir: "/tmp\x00x"}, "--workdir"},
		{"mounts", "a destination with a NUL byte is refused", Spec{Command: cmd, Mounts: []Mount{{Source: "/s", Destination: "/d\x00x"}}}, "--mount /s"},
		{"workdir", "an absolute one elsewhere", Spec{Command: cmd, Workdir: "/src"}, ""},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.check] = true
		t.Run(c.check+": "+c.behaviour, func(t *testing.T) {
			err := validate(&c.spec)
			var found bool
			for _, sc := range specChecks {
				if sc.name == c.check {
					found = true
					// The rule alone gives the same answer as all of them.
					if alone := sc.check(&c.spec); (alone == nil) != (err == nil) {
						t.Fatalf("the rule alone: %v; validate: %v", alone, err)
					}
				}
			}
			if !found {
				t.Fatalf("no rule %q in specChecks", c.check)
			}
			if c.step == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *SetupError
			if !errors.As(err, &se) || se.Step != c.step {
				t.Fatalf("got %v, want a SetupError of step %q", err, c.step)
			}
		})
	}
	for _, sc := range specChecks {
		if !covered[sc.name] {
			t.Errorf("the rule %q has no case", sc.name)
		}
	}
}

// TestPrepareRefusesBeforeResolving: a request that breaks a rule is
// refused as the request's fault (Refused) before anything is looked up,
// even one whose image or profile does not exist.
func TestPrepareRefusesBeforeResolving(t *testing.T) {
	_, err := prepare(&Spec{Image: "no-such-image", Profile: "no-such-profile", Memory: 1})
	var se *SetupError
	if !errors.As(err, &se) || se.Step != "--memory" || !se.Refused {
		t.Fatalf("got %v, want the refused --memory", err)
	}
}

// TestProfileNameDefaults: a Spec naming no profile runs under the default
// one; the name is decided in that one place.
func TestProfileNameDefaults(t *testing.T) {
	for _, c := range []struct{ profile, want string }{{"", DefaultProfile}, {"strict", "strict"}} {
		spec := Spec{Profile: c.profile}
		if got := spec.ProfileName(); got != c.want {
			t.Errorf("Profile %q: ProfileName %q, want %q", c.profile, got, c.want)
		}
	}
}

// TestUserOutOfRangeNamesTheOptionOnce: ids the caller may not map are
// refused as --user, named once ("jail: --user: --user ..." before).
func TestUserOutOfRangeNamesTheOptionOnce(t *testing.T) {
	_, err := prepare(&Spec{Command: []string{"true"}, User: "4294967295"})
	var se *SetupError
	if !errors.As(err, &se) || se.Step != "--user" || !se.Refused || strings.Count(err.Error(), "--user") != 1 {
		t.Fatalf("got %v, want a refused --user naming it once", err)
	}
}
