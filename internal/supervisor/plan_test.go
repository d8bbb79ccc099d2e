package supervisor

import (
	"errors"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/seccomp"
)

// testSandbox is what the tests vary of a sandbox.
type testSandbox struct {
	args     []string
	hostname string
	memory   int64 // 0: 512 MiB
}

// testPlan is the plan jail.Run resolves for a Spec of sb's command, host
// name and memory on the host tree, under the built-in default profile and
// with jail's defaults (on a host with cgroups). The tests of this package
// cannot import package jail, which imports it; a real sandbox runs from
// it all the same.
func testPlan(t testing.TB, sb testSandbox) *Plan {
	t.Helper()
	if layout, _ := cgroups.Detect(); layout.Version == cgroups.None {
		t.Skip("no cgroups: a plan would need jail's fallback limits")
	}
	p, err := planOf(sb)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planOf is testPlan, for a pool's fillers.
func planOf(sb testSandbox) (*Plan, error) {
	users := new(privdir.Passwd)
	id, err := namespaces.ForCaller(users, 0, 0)
	if err != nil {
		return nil, err
	}
	profile, policy, ok := seccomp.Builtin("default")
	if !ok {
		return nil, errors.New("no built-in default profile")
	}
	args := sb.args
	if len(args) == 0 {
		args = []string{"/bin/true"}
	}
	hostname := sb.hostname
	if hostname == "" {
		hostname = "jail"
	}
	limits := cgroups.Limits{Memory: 512 << 20, CPUs: 1, Pids: 256}
	if sb.memory != 0 {
		limits.Memory = sb.memory
	}
	scratch := limits.Memory / 2
	p := &Plan{Identity: id, Users: users, Limits: limits}
	p.Config = config.Init{
		Hostname: hostname,
		Rootfs:   config.Rootfs{HostTree: true, Home: "/root"},
		Limits: config.Limits{
			TmpSize: scratch, RunSize: min(16<<20, scratch), ShmSize: min(64<<20, scratch),
			UpperSize: scratch, HomeSize: scratch,
		},
		Process: config.Process{
			Args: args, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"},
			Cwd: "/", SwitchUser: id.SwitchesUser(),
		},
		Masks: profile.Masks, ReadOnly: profile.ReadOnly, Seccomp: policy,
	}
	for _, c := range profile.CapabilityNumbers() {
		p.Config.Capabilities |= 1 << c
	}
	p.Cgroup, _ = cgroups.Detect()
	return p, nil
}

// testJob captures the output, as `jail run --json` does.
func testJob() *Job { return &Job{Capture: true, OutputLimit: 1 << 20} }

// testPool is a pool of size sandboxes of sb.
func testPool(t testing.TB, sb testSandbox, size int) *Pool {
	t.Helper()
	return NewPool(testPlan(t, sb), func() (*Plan, error) { return planOf(sb) }, size)
}

// runIn runs sb's command in pool, as jail.Pool.Run does.
func runIn(t testing.TB, pool *Pool, sb testSandbox) (api.Result, *Timings, error) {
	t.Helper()
	tm := &Timings{Start: time.Now()}
	res, err := pool.Run(t.Context(), testJob(), testPlan(t, sb), tm)
	return res, tm, err
}
