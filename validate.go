package jail

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/secrets"
	"github.com/jail-sandbox/jail/rootfs"
)

// DefaultProfile is the profile a Spec that names none runs under.
const DefaultProfile = "default"

// ProfileName is the profile spec runs under: Profile, or DefaultProfile.
// It is the one place where the default profile is chosen.
func (spec *Spec) ProfileName() string {
	if spec.Profile == "" {
		return DefaultProfile
	}
	return spec.Profile
}

// Bounds on what a caller may pass; past them the kernel would refuse the
// exec, or the request is not what anyone means.
const (
	maxArgBytes   = 128 << 10 // MAX_ARG_STRLEN: one argument or K=V
	maxTotalBytes = 1 << 20   // all arguments and environment
	maxEnvKey     = 255
	maxHostname   = 64
	maxMounts     = 64
	maxSecrets    = 64
	// maxPids is the kernel's PID_MAX_LIMIT on 64-bit: pids.max refuses
	// more.
	maxPids = 4 << 20
)

// specCheck is one rule a Spec must follow, checked on the Spec alone.
type specCheck struct {
	name  string
	check func(*Spec) error
}

// specChecks are the rules of validate, in the order they are checked.
// Each looks at the Spec only: no file, profile, image or account is read,
// so that a bad request is refused before anything is looked up for it.
// What can be checked only against the host (a mount source, the image's
// own working directory, the size of the environment a profile and an image
// add to) is resolve's.
var specChecks = []specCheck{
	{"root", checkRoot},
	{"image", checkImage},
	{"command", checkCommand},
	{"net", checkNet},
	{"net limits", checkNetLimits},
	{"secrets", checkSecrets},
	{"memory", checkMemory},
	{"cpus", checkCPUs},
	{"pids", checkPids},
	{"timeout", checkTimeout},
	{"output limit", checkOutputLimit},
	{"user", checkUser},
	{"hostname", checkHostname},
	{"env", checkEnv},
	{"mounts", checkMounts},
	{"workdir", checkWorkdir},
}

// validate checks spec against specChecks and returns the first rule it
// breaks, as a SetupError naming the option at fault. It does no I/O.
func validate(spec *Spec) error {
	for _, c := range specChecks {
		if err := c.check(spec); err != nil {
			return err
		}
	}
	return nil
}

// checkRoot: an image and a root directory exclude each other.
func checkRoot(spec *Spec) error {
	if spec.Image != "" && spec.Rootfs != "" {
		return invalid("--image", "--image and --rootfs exclude each other")
	}
	return nil
}

// checkImage: the image is named by a reference (checked before the
// store is read or a registry asked), and the pull policy is known.
func checkImage(spec *Spec) error {
	if spec.Image != "" {
		if _, err := images.Normalize(spec.Image); err != nil {
			return invalid("image "+truncate(spec.Image), "not an image reference")
		}
	}
	switch spec.Pull {
	case "", PullMissing, PullNever, PullAlways:
	default:
		return invalid("--pull", "%q: must be %s, %s or %s", truncate(spec.Pull), PullNever, PullMissing, PullAlways)
	}
	return nil
}

// checkCommand: there is a command, unless an image may give one.
func checkCommand(spec *Spec) error {
	if len(spec.Command) == 0 && spec.Image == "" {
		return invalid("run", "no command given")
	}
	return nil
}

// netAllowPrefix starts --net's allowlist form.
const netAllowPrefix = "allow="

// egressRules returns the rules of --net allow=RULES, and whether spec's
// network has the egress gateway at all.
func egressRules(net string) (string, bool) {
	return strings.CutPrefix(net, netAllowPrefix)
}

// maxNetConns bounds --net-limit conns=.
const maxNetConns = 65536

// checkNetLimits: within bounds, and only with the gateway.
func checkNetLimits(spec *Spec) error {
	l := spec.NetLimits
	if l == (NetLimits{}) {
		return nil
	}
	if _, ok := egressRules(spec.Net); !ok {
		return invalid("--net-limit", "limits the egress gateway, which only --net allow=... has")
	}
	if l.MaxConns < 0 || l.MaxConns > maxNetConns || l.MaxBytes < 0 || l.Rate < 0 {
		return invalid("--net-limit", "conns from 1 to %d, bytes and rate positive", maxNetConns)
	}
	return nil
}

// maxNetRules bounds --net allow='s text: rules.MaxRules rules of at most
// rules.MaxRuleLen bytes. The rules themselves are parsed by the gateway
// program (the public-suffix list links net/http), before anything of the
// sandbox runs.
const maxNetRules = 256 * (1024 + 1)

// checkNet: none, or allow= and a list of a bounded size, one line.
func checkNet(spec *Spec) error {
	if spec.Net == "" || spec.Net == "none" {
		return nil
	}
	rules, ok := egressRules(spec.Net)
	if !ok {
		return invalid("--net", "%q: want none or allow=RULE[,RULE...]", truncate(spec.Net))
	}
	if len(rules) > maxNetRules || strings.ContainsAny(rules, "\x00\n\r") {
		return invalid("--net", "the rules are longer than %d bytes, or hold a NUL byte or a line break", maxNetRules)
	}
	return nil
}

// maxBoundHosts bounds the hosts one secret is bound to.
const maxBoundHosts = 32

// splitSecret splits --secret's NAME@HOST[,HOST...] (a secret bound to
// hosts, which the sandbox sees only as a placeholder: docs/egress.md);
// hosts is nil for a plain NAME.
func splitSecret(s string) (name string, hosts []string) {
	name, list, bound := strings.Cut(s, "@")
	if !bound {
		return s, nil
	}
	return name, strings.Split(list, ",")
}

// checkSecrets: at most maxSecrets, each a variable's name (the variable
// it is injected as), each at most once; NAME@HOST[,HOST...] only with the
// egress gateway (--net allow=), which checks each host against the rules.
func checkSecrets(spec *Spec) error {
	if len(spec.Secrets) > maxSecrets {
		return invalid("--secret", "more than %d secrets", maxSecrets)
	}
	seen := map[string]bool{}
	for _, s := range spec.Secrets {
		name, hosts := splitSecret(s)
		if !secrets.ValidName(name) {
			return invalid("--secret "+truncate(s), "a secret's name is a variable name: a letter or _, then letters, digits or _")
		}
		if seen[name] {
			return invalid("--secret "+truncate(s), "%s is given more than once", name)
		}
		seen[name] = true
		if hosts == nil {
			continue
		}
		// The profile may give the gateway (resolve checks again).
		if _, ok := egressRules(spec.Net); !ok && spec.Net != "" {
			return invalid("--secret "+truncate(s), "a secret bound to hosts needs the egress gateway (--net allow=...), which puts it in their requests")
		}
		if len(hosts) > maxBoundHosts {
			return invalid("--secret "+truncate(s), "bound to more than %d hosts", maxBoundHosts)
		}
		for _, h := range hosts {
			if h == "" || len(h) > 253 || strings.ContainsAny(h, "\x00\n\r /:@*!") {
				return invalid("--secret "+truncate(s), "%q: a host is a name, without a port, path or wildcard", truncate(h))
			}
		}
		for _, e := range spec.Env {
			if strings.HasPrefix(e, name+"=") || e == name {
				return invalid("--secret "+truncate(s), "--env also sets %s", name)
			}
		}
	}
	return nil
}

// checkMemory: 0 (the default) or at least 4 MiB.
func checkMemory(spec *Spec) error {
	if spec.Memory < 0 || (spec.Memory > 0 && spec.Memory < 4<<20) {
		return invalid("--memory", "%d bytes: must be at least 4M", spec.Memory)
	}
	return nil
}

// checkCPUs: 0 (the default) up to 1024 cores.
func checkCPUs(spec *Spec) error {
	if spec.CPUs < 0 || spec.CPUs > 1024 {
		return invalid("--cpus", "%g: must be between 0.01 and 1024", spec.CPUs)
	}
	return nil
}

// checkPids: 0 (the default) up to the kernel's most.
func checkPids(spec *Spec) error {
	if spec.Pids < 0 || spec.Pids > maxPids {
		return invalid("--pids", "%d: must be between 1 and %d", spec.Pids, maxPids)
	}
	return nil
}

// checkTimeout: none is 0, never negative.
func checkTimeout(spec *Spec) error {
	if spec.Timeout < 0 {
		return invalid("--timeout", "%s: must be positive", spec.Timeout)
	}
	return nil
}

// checkOutputLimit: 0 (the default) up to MaxOutputLimit.
func checkOutputLimit(spec *Spec) error {
	if spec.OutputLimit < 0 {
		return invalid("--output-limit", "%d: must be positive", spec.OutputLimit)
	}
	if spec.OutputLimit > MaxOutputLimit {
		return invalid("--output-limit", "%d bytes: must be at most %dM", spec.OutputLimit, MaxOutputLimit>>20)
	}
	return nil
}

// checkUser: UID[:GID] in numbers.
func checkUser(spec *Spec) error {
	if _, _, err := parseUser(spec.User); err != nil {
		return invalid("--user", "%v", err)
	}
	return nil
}

// checkHostname: a host name the kernel and a resolver take.
func checkHostname(spec *Spec) error {
	if h := spec.Hostname; h != "" && (len(h) > maxHostname || !validHostname(h)) {
		return invalid("--hostname", "%q: must be 1 to %d letters, digits, '-' or '.'", truncate(h), maxHostname)
	}
	return nil
}

// checkEnv: every entry is K=V with a valid name and an exec's size.
func checkEnv(spec *Spec) error {
	for _, e := range spec.Env {
		if err := checkEnvEntry(e); err != nil {
			return err
		}
	}
	return nil
}

// checkEnvEntry checks one K=V entry of the environment.
func checkEnvEntry(e string) error {
	k, _, hasValue := strings.Cut(e, "=")
	if !hasValue {
		return invalid("--env "+truncate(e), "must be K=V")
	}
	if len(k) > maxEnvKey || !validEnvKey(k) {
		return invalid("--env "+truncate(k), "not a valid variable name (at most %d of A-Z a-z 0-9 _ . -)", maxEnvKey)
	}
	if len(e) > maxArgBytes || strings.IndexByte(e, 0) >= 0 {
		return invalid("--env "+k, "value longer than %d bytes or holds a NUL byte", maxArgBytes)
	}
	return nil
}

// checkMounts: at most maxMounts, the workspace included, each from an
// absolute host path to a destination the sandbox may have.
func checkMounts(spec *Spec) error {
	mounts := spec.Mounts
	if spec.Workspace != "" {
		mounts = append([]Mount{{Source: spec.Workspace, Destination: "/workspace", Writable: true}}, mounts...)
	}
	if len(mounts) > maxMounts {
		return invalid("--mount", "more than %d mounts", maxMounts)
	}
	for i, m := range mounts {
		flag := "--mount " + m.Source
		if i == 0 && spec.Workspace != "" {
			flag = "--workspace " + m.Source
		}
		if !filepath.IsAbs(m.Source) {
			return invalid(flag, "source must be an absolute path")
		}
		if err := rootfs.CheckDestination(m.Destination); err != nil {
			return invalid(flag, "%v", err)
		}
	}
	return nil
}

// checkWorkdir: an absolute path outside what jail manages.
func checkWorkdir(spec *Spec) error {
	if spec.Workdir != "" {
		if err := rootfs.CheckWorkdir(spec.Workdir); err != nil {
			return invalid("--workdir", "%v", err)
		}
	}
	return nil
}

// validEnvKey: a letter or '_', then letters, digits, '_', '.' or '-'.
func validEnvKey(k string) bool {
	for i, c := range k {
		switch {
		case c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z'):
		case i > 0 && (('0' <= c && c <= '9') || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return k != ""
}

// validHostname: letters, digits, '-' and '.', starting and ending with a
// letter or digit.
func validHostname(h string) bool {
	for i, c := range h {
		alnum := ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
		if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(h)-1) {
			return false
		}
	}
	return h != ""
}

// parseUser reads UID[:GID]; GID defaults to UID.
func parseUser(s string) (uid, gid uint32, err error) {
	if s == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(s, ":")
	uv, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: UID must be a number", s)
	}
	gv := uv
	if hasGroup {
		if gv, err = strconv.ParseUint(g, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("%q: GID must be a number", s)
		}
	}
	return uint32(uv), uint32(gv), nil
}

// truncate shortens user input quoted in an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
