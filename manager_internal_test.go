package jail

import "testing"

// TestFingerprintFollowsWhatTheSpecResolvesTo: the digest that keeps
// create --reuse from serving a changed configuration changes with the
// profile's policy and is stable otherwise.
func TestFingerprintFollowsWhatTheSpecResolvesTo(t *testing.T) {
	a, err := fingerprint(&Spec{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := fingerprint(&Spec{Profile: DefaultProfile})
	strict, err := fingerprint(&Spec{Profile: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	if a != again || a == strict {
		t.Errorf("default %s, default again %s, strict %s", a, again, strict)
	}
	if _, err := fingerprint(&Spec{Image: "no-such-image-jail-test"}); err == nil {
		t.Error("an image not in the store gave a fingerprint")
	}
}

// TestSameSandbox: what create --reuse compares.
func TestSameSandbox(t *testing.T) {
	base := storedOf(&Spec{Memory: 1 << 30, Env: []string{}})
	for _, c := range []struct {
		name string
		spec Spec
		same bool
	}{
		{"the same", Spec{Memory: 1 << 30}, true},
		{"labels differ", Spec{Memory: 1 << 30, Labels: map[string]string{"a": "b"}}, true},
		{"memory", Spec{Memory: 2 << 30}, false},
		{"env", Spec{Memory: 1 << 30, Env: []string{"A=1"}}, false},
		{"secrets", Spec{Memory: 1 << 30, Secrets: []string{"T"}}, false},
		{"workspace", Spec{Memory: 1 << 30, Workspace: "/w"}, false},
		{"ttl", Spec{Memory: 1 << 30, TTL: 1}, false},
		{"profile named as the default", Spec{Memory: 1 << 30, Profile: DefaultProfile}, true},
		{"another profile", Spec{Memory: 1 << 30, Profile: "strict"}, false},
		{"mounts", Spec{Memory: 1 << 30, Mounts: []Mount{{Source: "/a", Destination: "/b"}}}, false},
		{"net", Spec{Memory: 1 << 30, Net: "allow=x"}, false},
	} {
		if got := sameSandbox(base, storedOf(&c.spec)); got != c.same {
			t.Errorf("%s: same %v, want %v", c.name, got, c.same)
		}
	}
}
