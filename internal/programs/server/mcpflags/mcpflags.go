// Package mcpflags defines the flags of `jail mcp` once, for the two
// processes that read them: jail, which checks them before it execs the
// server program, and the server program, which gets them as typed and
// parses them again. They fix everything about the sandboxes an MCP client
// gets (root, policy, network, mounts, limits): no tool argument can
// change them. It links only the flag package and package jail, which the
// jail binary links anyway, so that jail's own start stays short.
package mcpflags

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jail-sandbox/jail"
)

// Usage is the synopsis of `jail mcp`.
const Usage = "jail mcp [--image REF | --rootfs DIR] [--profile NAME] [--workspace DIR] [--net none|allow=RULES] [--memory SIZE] [--cpus N] [--pids N] [--timeout DUR] [--output-limit SIZE] [--max-sandboxes N] [--idle-timeout DUR] ..."

// Defaults of the MCP server's own limits.
const (
	// DefaultTimeout is each command's time limit when a tool call asks
	// for none, and the most it may ask for.
	DefaultTimeout = 60 * time.Second
	// DefaultOutputLimit is the most bytes of each stream a tool result
	// carries: a tool's output goes into a model's context.
	DefaultOutputLimit = 32 << 10
	// DefaultMaxSandboxes bounds the sandboxes sandbox_create keeps.
	DefaultMaxSandboxes = 8
	// DefaultIdleTimeout removes an MCP sandbox unused this long: what a
	// server killed by SIGKILL could not remove goes then.
	DefaultIdleTimeout = time.Hour
)

// list collects a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// Flags are the options of `jail mcp` as typed.
type Flags struct {
	image, rootfs, profile, workspace, net, netLimit, memory, pids string
	outputLimit                                                    string
	cpus                                                           float64
	readOnly                                                       bool
	mounts, env, secrets                                           list
	timeout, idleTimeout                                           time.Duration
	maxSandboxes                                                   int
}

// Register defines the flags in fs, with their defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.image, "image", "", "root filesystem from the image `REF` in the local store")
	fs.StringVar(&f.rootfs, "rootfs", "", "`DIR` as the read-only lower layer of / (default: the host's tree, read-only)")
	fs.StringVar(&f.profile, "profile", "", "named policy `NAME` (default default)")
	fs.StringVar(&f.workspace, "workspace", "", "host `DIR` bound read-write at /workspace in every sandbox")
	fs.StringVar(&f.net, "net", "none", "network: none (loopback only), or allow=RULE[,RULE...] (docs/egress.md)")
	fs.StringVar(&f.netLimit, "net-limit", "", "the egress gateway's limits: conns=N,bytes=SIZE,rate=SIZE")
	fs.StringVar(&f.memory, "memory", "", "memory limit `SIZE` of each sandbox (default 512M)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU quota of each sandbox in cores (default 1)")
	fs.StringVar(&f.pids, "pids", "", "most processes and threads at once in a sandbox (default 256)")
	fs.Var(&f.mounts, "mount", "`SRC:DST[:ro|:rw]` extra bind mount (repeatable)")
	fs.Var(&f.env, "env", "`K=V` to set, or K to copy from jail mcp's environment (repeatable)")
	fs.Var(&f.secrets, "secret", "`NAME[@HOST,...]` of a secret (jail secret add) given to every sandbox (repeatable)")
	fs.BoolVar(&f.readOnly, "read-only", false, "no writable root layer")
	fs.DurationVar(&f.timeout, "timeout", DefaultTimeout, "each command's time limit `DUR` when a tool call gives none, and the most it may give")
	fs.StringVar(&f.outputLimit, "output-limit", "32K", "the most bytes of each stream a tool result carries, `SIZE`")
	fs.IntVar(&f.maxSandboxes, "max-sandboxes", DefaultMaxSandboxes, "the most sandboxes sandbox_create keeps at once, `N` (0: the tool is refused)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", DefaultIdleTimeout, "remove an MCP sandbox unused for `DUR` (0: never)")
}

// Config is what `jail mcp` serves with: the spec every sandbox of its is
// made from, and the bounds of its tools.
type Config struct {
	// Sandbox is the RUN OPTIONS of every sandbox: no tool changes them.
	Sandbox jail.Spec
	// Timeout is a command's time limit by default, and at most.
	Timeout time.Duration
	// OutputLimit is the most bytes kept of each stream of a command.
	OutputLimit int64
	// MaxSandboxes bounds what sandbox_create keeps.
	MaxSandboxes int
	// IdleTimeout removes a sandbox unused that long (0: never).
	IdleTimeout time.Duration
}

// Config checks the flags and returns what they configure, or an error
// that names the flag, as one line.
func (f *Flags) Config() (Config, error) {
	c := Config{Timeout: f.timeout, MaxSandboxes: f.maxSandboxes, IdleTimeout: f.idleTimeout}
	spec := jail.Spec{
		Image: f.image, Rootfs: f.rootfs, Profile: f.profile, Workspace: f.workspace,
		CPUs: f.cpus, ReadOnly: f.readOnly, Secrets: f.secrets,
	}
	if f.net != "none" {
		spec.Net = f.net
	}
	var err error
	if spec.NetLimits, err = jail.ParseNetLimits(f.netLimit); err != nil {
		return c, fmt.Errorf("--net-limit: %v", err)
	}
	if f.memory != "" {
		if spec.Memory, err = jail.ParseSize(f.memory); err != nil {
			return c, fmt.Errorf("--memory: %v", err)
		}
	}
	if f.pids != "" {
		if _, err := fmt.Sscanf(f.pids, "%d", &spec.Pids); err != nil || fmt.Sprint(spec.Pids) != f.pids {
			return c, fmt.Errorf("--pids: %q is not a number", f.pids)
		}
	}
	if f.cpus < 0 {
		return c, fmt.Errorf("--cpus: must be positive")
	}
	for _, m := range f.mounts {
		mount, err := jail.ParseMount(m)
		if err != nil {
			return c, fmt.Errorf("--mount %v", err)
		}
		spec.Mounts = append(spec.Mounts, mount)
	}
	for _, e := range f.env {
		if strings.Contains(e, "=") {
			spec.Env = append(spec.Env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			spec.Env = append(spec.Env, e+"="+v)
		}
	}
	if f.timeout <= 0 {
		return c, fmt.Errorf("--timeout %s: must be positive (a tool call must end)", f.timeout)
	}
	// The sandbox's own timeout is each exec's default (docs/persistent.md).
	spec.Timeout = f.timeout
	if c.OutputLimit, err = jail.ParseSize(f.outputLimit); err != nil {
		return c, fmt.Errorf("--output-limit: %v", err)
	}
	if c.OutputLimit <= 0 || c.OutputLimit > jail.MaxOutputLimit {
		return c, fmt.Errorf("--output-limit %s: must be between 1 and %dM", f.outputLimit, jail.MaxOutputLimit>>20)
	}
	if f.maxSandboxes < 0 || f.maxSandboxes > 1024 {
		return c, fmt.Errorf("--max-sandboxes %d: must be between 0 and 1024", f.maxSandboxes)
	}
	if f.idleTimeout < 0 {
		return c, fmt.Errorf("--idle-timeout %s: must be positive", f.idleTimeout)
	}
	c.Sandbox = spec
	return c, nil
}
