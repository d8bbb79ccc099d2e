//go:build linux

package jail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/egress/known"
	"github.com/jail-sandbox/jail/internal/egress/launch"
	"github.com/jail-sandbox/jail/internal/egress/protocol"
	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/secrets"
	"github.com/jail-sandbox/jail/internal/supervisor"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp"
)

// proxyURL and socksURL are the gateway's proxies as the sandbox reaches
// them.
var (
	proxyURL = fmt.Sprintf("http://127.0.0.1:%d", protocol.ProxyPort)
	socksURL = fmt.Sprintf("socks5h://127.0.0.1:%d", protocol.SOCKSPort)
)

// egressEnv is what proxy-aware programs read, set for every command of a
// sandbox with the gateway: curl, pip, git, Go and Python read the
// lowercase or uppercase variables, npm its own, Node 24 and later
// NODE_USE_ENV_PROXY, the JVM its system properties. The caller's --env
// wins over each.
var egressEnv = []string{
	"HTTP_PROXY=" + proxyURL, "HTTPS_PROXY=" + proxyURL, "ALL_PROXY=" + socksURL, "NO_PROXY=localhost,127.0.0.1",
	"http_proxy=" + proxyURL, "https_proxy=" + proxyURL, "all_proxy=" + socksURL, "no_proxy=localhost,127.0.0.1",
	"npm_config_proxy=" + proxyURL, "npm_config_https_proxy=" + proxyURL,
	"NODE_USE_ENV_PROXY=1",
	fmt.Sprintf("JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%d -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=%d -Dhttp.nonProxyHosts=localhost|127.0.0.1",
		protocol.ProxyPort, protocol.ProxyPort),
}

// egressConfig adds to the init's description what the gateway needs of
// the sandbox: its listeners and its resolv.conf.
func egressConfig(c *config.Init) {
	for _, l := range protocol.Listeners {
		c.Listen = append(c.Listen, config.Listener{Stream: l.Stream, Address: l.Address, Port: l.Port})
	}
	c.Files = append(c.Files,
		config.File{Destination: "/etc/resolv.conf", Data: []byte(protocol.ResolvConf)},
		// Names are the resolver's to give: a host's /etc/hosts entry
		// would send a program past it, to an address the captured ports
		// refuse.
		config.File{Destination: "/etc/hosts", Data: []byte(sandboxHosts(c.Hostname)), Optional: true})
}

// sandboxHosts is the sandbox's /etc/hosts: loopback names and its own.
func sandboxHosts(hostname string) string {
	return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
}

// profileNet gives spec the profile's network when --net says nothing,
// and refuses any other than it, or none, when the profile locks it. A
// secret bound to hosts needs the gateway either way.
func profileNet(spec *Spec, p *profiles.Profile) error {
	if p.NetworkLocked && spec.Net != "" && spec.Net != "none" && spec.Net != p.Network {
		return invalid("--net", "profile %s fixes the network at %s: --net cannot widen it", p.Name, p.Network)
	}
	if spec.Net == "" && p.Network != "" && p.Network != "none" {
		spec.Net = p.Network
	}
	if _, ok := egressRules(spec.Net); !ok {
		for _, s := range spec.Secrets {
			if _, hosts := splitSecret(s); hosts != nil {
				return invalid("--secret "+truncate(s), "a secret bound to hosts needs the egress gateway (--net allow=...), which puts it in their requests")
			}
		}
	}
	return nil
}

// auditPath is the audit log the gateway writes, "" for none.
func auditPath() string {
	path := audit.DefaultPath(os.Geteuid(), os.Getenv)
	if path == "-" {
		return ""
	}
	return path
}

// startGateway starts spec's gateway (--net allow=RULES) for a sandbox
// named name ("" for a run's), with the secrets bound to hosts.
func startGateway(spec *Spec, rules, name string, detached bool, bound []protocol.Secret) (*launch.Gateway, error) {
	cfg := protocol.Config{
		Rules: rules, Sandbox: name, Labels: spec.Labels, UID: os.Geteuid(),
		Audit: auditPath(), Detached: detached, Events: spec.NetDenials != nil && !detached,
		Secrets: bound,
		Limits:  protocol.Limits{MaxConns: spec.NetLimits.MaxConns, MaxBytes: spec.NetLimits.MaxBytes, Rate: spec.NetLimits.Rate},
	}
	gw, err := launch.Start(cfg, os.Stderr)
	if err != nil {
		return nil, &SetupError{Step: "--net", Err: err}
	}
	return gw, nil
}

// egressJob gives a run's job its gateway: it sets job.Egress, and the
// sandbox's description what the gateway's answer holds when secrets are
// bound (which must wait for it). done hangs up on the gateway at the
// run's end.
//
// A rule list that a gateway of this version accepted before (package
// known) needs no gateway before the command starts: the gateway then
// starts on the sandbox's first connection or query (lazyGateway), and a
// run that uses no network pays for none. Otherwise the gateway starts
// now, beside the sandbox's making, and the command is released only once
// it has parsed the rules, which are then remembered.
func egressJob(job *supervisor.Job, c *config.Init, spec *Spec, rules string, bound []protocol.Secret, users *privdir.Passwd) (done func(), err error) {
	version := programs.Version(programs.Gateway)
	knownDir := known.Dir(seccomp.CacheDir(users))
	if len(bound) == 0 && known.Accepted(knownDir, rules, version) {
		lazy := &lazyGateway{spec: *spec, rules: rules}
		job.Egress = lazy.arm
		return lazy.close, nil
	}
	started := startGatewayAsync(spec, rules, bound)
	if len(bound) > 0 {
		// The sandbox trusts the gateway's authority and gets the
		// placeholders: both are in the gateway's answer, which the
		// sandbox's description needs.
		gw, err := started.wait()
		var hello protocol.Hello
		if err == nil {
			hello, err = gw.Hello()
			err = gatewayError(err)
		}
		if err != nil {
			started.close()
			return nil, err
		}
		applyHello(c, hello)
	}
	denials := spec.NetDenials
	job.Egress = func(listeners []*os.File, initPidfd *os.File) error {
		gw, err := started.wait()
		if err != nil {
			return err
		}
		if err := serveGateway(gw, listeners, initPidfd, denials); err != nil {
			return err
		}
		known.Remember(knownDir, rules, version)
		return nil
	}
	return started.close, nil
}

// pendingGateway is a gateway being started in the background.
type pendingGateway struct {
	done chan struct{}
	gw   *launch.Gateway
	err  error
}

// startGatewayAsync starts a run's gateway (startGateway) beside the
// caller.
func startGatewayAsync(spec *Spec, rules string, bound []protocol.Secret) *pendingGateway {
	p := &pendingGateway{done: make(chan struct{})}
	own := *spec // the caller goes on with spec
	go func() {
		defer close(p.done)
		p.gw, p.err = startGateway(&own, rules, "", false, bound)
	}()
	return p
}

// wait returns the started gateway, or why it could not start.
func (p *pendingGateway) wait() (*launch.Gateway, error) {
	<-p.done
	return p.gw, p.err
}

// close hangs up on the gateway once it has started.
func (p *pendingGateway) close() {
	if gw, err := p.wait(); err == nil {
		_ = gw.Close()
	}
}

// lazyGateway is a run's gateway started only when the sandbox first uses
// its sockets: a connection waiting on a listener, or a query on the
// resolver's. Until then the sockets' queues hold what arrives (the
// kernel's backlog), so nothing is lost; the first connection waits the
// gateway's start.
type lazyGateway struct {
	spec  Spec
	rules string

	armed bool
	stop  int           // an eventfd that ends the watch
	done  chan struct{} // closed when the watch has ended
	gw    *launch.Gateway
}

// arm watches the sandbox's listeners (descriptors of its own: the
// supervisor closes the ones it hands over) until the sandbox uses them or
// close is called.
func (l *lazyGateway) arm(listeners []*os.File, initPidfd *os.File) error {
	files := make([]*os.File, 0, len(listeners)+1)
	dup := func(f *os.File) error {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return err
		}
		files = append(files, os.NewFile(uintptr(fd), f.Name()))
		return nil
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, f := range listeners {
		if err := dup(f); err != nil {
			closeAll()
			return &SetupError{Step: "egress", Err: err}
		}
	}
	var pidfd *os.File
	if initPidfd != nil {
		if err := dup(initPidfd); err != nil {
			closeAll()
			return &SetupError{Step: "egress", Err: err}
		}
		pidfd = files[len(files)-1]
		files = files[:len(files)-1]
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		closeAll()
		if pidfd != nil {
			pidfd.Close()
		}
		return &SetupError{Step: "egress", Err: err}
	}
	l.armed, l.stop, l.done = true, stop, make(chan struct{})
	go l.watch(files, pidfd)
	return nil
}

// watch waits for the first use of the listeners, then starts the
// gateway and hands them over. A gateway that refuses the rules (a
// remembered list this gateway does not accept after all) ends the
// sandbox, and says why among jail's notices.
func (l *lazyGateway) watch(listeners []*os.File, pidfd *os.File) {
	defer close(l.done)
	defer func() {
		for _, f := range listeners {
			f.Close()
		}
		if pidfd != nil {
			pidfd.Close()
		}
	}()
	fds := make([]unix.PollFd, 0, len(listeners)+1)
	for _, f := range listeners {
		fds = append(fds, unix.PollFd{Fd: int32(f.Fd()), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(l.stop), Events: unix.POLLIN})
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || fds[len(fds)-1].Revents != 0 {
			return
		}
		break
	}
	gw, err := startGateway(&l.spec, l.rules, "", false, nil)
	if err == nil {
		if err = serveGateway(gw, listeners, pidfd, l.spec.NetDenials); err != nil {
			_ = gw.Close()
			gw = nil
		}
	}
	if err != nil {
		if pidfd != nil {
			_ = unix.PidfdSendSignal(int(pidfd.Fd()), unix.SIGKILL, nil, 0)
		}
		if l.spec.Notices != nil {
			fmt.Fprintf(l.spec.Notices, "%v (the sandbox was ended)\n", err)
		}
		return
	}
	l.gw = gw
}

// close ends the watch and hangs up on the gateway, if it started.
func (l *lazyGateway) close() {
	if !l.armed {
		return
	}
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(l.stop, one[:])
	<-l.done
	unix.Close(l.stop)
	if l.gw != nil {
		_ = l.gw.Close()
	}
}

// gatewayError is err of the gateway as the run's: a refusal of its
// configuration is the request's fault. nil stays nil.
func gatewayError(err error) error {
	if err == nil {
		return nil
	}
	var refused *launch.RefusedError
	if errors.As(err, &refused) {
		reason := strings.TrimPrefix(refused.Reason, "jail: ")
		step, rest, ok := strings.Cut(reason, ": ")
		if !ok {
			step, rest = "--net", reason
		}
		return &SetupError{Step: step, Err: errors.New(rest), Refused: true}
	}
	return &SetupError{Step: "--net", Err: err}
}

// serveGateway hands gw the sandbox's listeners; denials go to w as
// "net: denied HOST:PORT (reason)" lines.
func serveGateway(gw *launch.Gateway, listeners []*os.File, initPidfd *os.File, w io.Writer) error {
	var denied func(protocol.Event)
	if w != nil {
		denied = func(e protocol.Event) {
			// What the sandbox named reaches the user's terminal: one
			// line, its control bytes escaped.
			target := oneline.Escape(e.Host)
			if e.Port != 0 {
				target = fmt.Sprintf("%s:%d", target, e.Port)
			}
			fmt.Fprintf(w, "net: denied %s (%s)\n", target, oneline.Escape(e.Reason))
		}
	}
	if err := gw.Start(listeners, initPidfd, denied); err != nil {
		return gatewayError(err)
	}
	return nil
}

// readSecrets reads the values of --secret's names: env has the plain
// ones' NAME=VALUE, bound those bound to hosts, for the gateway; values
// has them all, for redaction.
func readSecrets(list []string, override func(string) string) (values secrets.Values, env []string, bound []protocol.Secret, err error) {
	names := make([]string, len(list))
	for i, s := range list {
		names[i], _ = splitSecret(s)
	}
	if values, err = secretValues(names, override); err != nil {
		return secrets.Values{}, nil, nil, err
	}
	for _, s := range list {
		name, hosts := splitSecret(s)
		value, _ := values.Value(name)
		if hosts == nil {
			env = append(env, name+"="+value)
		} else {
			bound = append(bound, protocol.Secret{Name: name, Value: value, Hosts: hosts})
		}
	}
	return values, env, bound, nil
}

// trustStore is where the sandbox's programs find the authorities they
// trust (Debian's and Alpine's bundle; what OpenSSL, curl, git, Python
// and Go read first), and trustEnv points the rest at it.
const trustStore = "/etc/ssl/certs/ca-certificates.crt"

var trustEnv = []string{
	"SSL_CERT_FILE=" + trustStore, "REQUESTS_CA_BUNDLE=" + trustStore, "CURL_CA_BUNDLE=" + trustStore,
	"NODE_EXTRA_CA_CERTS=" + trustStore, "PIP_CERT=" + trustStore, "GIT_SSL_CAINFO=" + trustStore,
}

// applyHello gives the sandbox what the gateway answered: its authority,
// added to the sandbox's trust store, and each bound secret's placeholder
// as the secret's variable.
func applyHello(c *config.Init, hello protocol.Hello) {
	if hello.CA != "" {
		c.Files = append(c.Files, config.File{Destination: trustStore, Data: []byte(hello.CA), Append: true})
		c.Process.Env = mergeEnv(c.Process.Env, trustEnv)
	}
	var placeholders []string
	for name, ph := range hello.Placeholders {
		placeholders = append(placeholders, name+"="+ph)
	}
	sort.Strings(placeholders)
	c.Process.Env = mergeEnv(c.Process.Env, placeholders)
}
