package devicerules

import (
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
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

func TestDeviceMatchesDropWhatARuleForEveryDeviceDecides(t *testing.T) {
	cases := []struct {
		name         string
		rules        []specs.LinuxDeviceCgroup
		defaultAllow bool
		kept         int
	}{
		{"no rules: a new cgroup allows everything", nil, true, 0},
		{"deny all, then exceptions", []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "rwm")}, false, 1},
		{"empty type and access are all", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), rule(false, "", -1, -1, "")}, false, 0},
		{"the last of several", []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "r"), rule(true, "a", -1, none, "rwm"), rule(false, "b", 8, none, "w")}, true, 1},
		// Rules that look like a deny-all and are not: each denies
		// part, and must neither become the default nor drop the rules
		// before it.
		{"char devices only", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), rule(false, "c", -1, -1, "rwm")}, true, 2},
		{"all but mknod", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), rule(false, "a", -1, -1, "rw")}, true, 2},
		{"one major", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), rule(false, "a", 1, none, "rwm")}, true, 2},
		{"one minor", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), rule(false, "", none, 0, "rwm")}, true, 2},
		// ...nor an allow that looks like an allow-all.
		{"allow read of all", []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "a", none, none, "r")}, false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def, kept, err := Matches(c.rules)
			if err != nil || def != c.defaultAllow || len(kept) != c.kept {
				t.Errorf("default allow %v, %d rules kept (%v); want %v, %d", def, len(kept), err, c.defaultAllow, c.kept)
			}
			compact, err := Compact(c.rules)
			if err != nil || len(compact) < c.kept || len(compact) > c.kept+1 {
				t.Errorf("compacted to %d rules (%v); want %d and the rule for every device, if any", len(compact), err, c.kept)
			}
		})
	}
}

func TestDeviceRulesCheckRefusesBadRules(t *testing.T) {
	for _, r := range []specs.LinuxDeviceCgroup{
		rule(true, "u", 1, 3, "rwm"), rule(true, "c", 1, 3, "rwx"), rule(true, "c", -3, 3, "r"),
		rule(true, "c", 1<<32, 3, "r"), rule(true, "c", 1, 1<<40, "r"),
	} {
		rules := []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "r"), r}
		if err := Check(rules); err == nil || !strings.HasPrefix(err.Error(), "device rule 1: ") {
			t.Errorf("check %+v: %v", r, err)
		}
		if _, _, err := Matches(rules); err == nil {
			t.Errorf("matches %+v: accepted", r)
		}
		if _, err := Compact(rules); err == nil {
			t.Errorf("compact %+v: accepted", r)
		}
	}
	huge := make([]specs.LinuxDeviceCgroup, MaxRules+1)
	for i := range huge {
		huge[i] = rule(true, "c", 1, int64(i), "r")
	}
	if err := Check(huge); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d rules: %v", len(huge), err)
	}
	if err := Check(huge[:MaxRules]); err != nil {
		t.Errorf("%d rules: %v", MaxRules, err)
	}
}
