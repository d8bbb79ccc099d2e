//go:build linux

package jail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/egress/launch"
	"github.com/jail-sandbox/jail/internal/egress/protocol"
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
	c.Files = append(c.Files, config.File{Destination: "/etc/resolv.conf", Data: []byte(protocol.ResolvConf)})
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
// named name ("" for a run's).
func startGateway(spec *Spec, rules, name string, detached bool) (*launch.Gateway, error) {
	cfg := protocol.Config{
		Rules: rules, Sandbox: name, Labels: spec.Labels, UID: os.Geteuid(),
		Audit: auditPath(), Detached: detached, Events: spec.NetDenials != nil && !detached,
	}
	gw, err := launch.Start(cfg, os.Stderr)
	if err != nil {
		return nil, &SetupError{Step: "--net", Err: err}
	}
	return gw, nil
}

// gatewayError is err of the gateway as the run's: a refusal of its
// configuration is the request's fault.
func gatewayError(err error) error {
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
func serveGateway(gw *launch.Gateway, listeners []*os.File, w io.Writer) error {
	var denied func(protocol.Event)
	if w != nil {
		denied = func(e protocol.Event) {
			target := e.Host
			if e.Port != 0 {
				target = fmt.Sprintf("%s:%d", e.Host, e.Port)
			}
			fmt.Fprintf(w, "net: denied %s (%s)\n", target, e.Reason)
		}
	}
	if err := gw.Start(listeners, nil, denied); err != nil {
		return gatewayError(err)
	}
	return nil
}
