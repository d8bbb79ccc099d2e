package main

import (
	"net"

	"github.com/jail-sandbox/jail/internal/audit"
	egressgw "github.com/jail-sandbox/jail/internal/egress/gateway"
)

// startProxies serves the HTTP and SOCKS proxies and the captured ports
// (the listeners other than the resolver's) with package gateway, whose
// captured connections are named by the resolver's addresses.
func (g *gateway) startProxies(listeners map[string]net.Listener) (interface{ Close() error }, error) {
	cfg := egressgw.Config{
		Rules:  g.rules,
		NameOf: g.dns.Lookup,
		Limits: egressgw.Limits{
			MaxConns: g.cfg.Limits.MaxConns, MaxBytes: g.cfg.Limits.MaxBytes, Rate: g.cfg.Limits.Rate,
		},
		OnEvent: g.recordConnection,
		// The listeners are the sandbox's; the gateway dials in its own
		// (the caller's) namespace.
		ListenersElsewhere: true,
	}
	if g.secrets != nil {
		cfg.Interceptor = g.secrets
	}
	gw, err := egressgw.New(cfg)
	if err != nil {
		return nil, err
	}
	go func() {
		_ = gw.Serve(egressgw.Listeners{
			Proxy: listeners["proxy"], SOCKS: listeners["socks"],
			HTTP: listeners["http"], TLS: listeners["tls"],
		})
	}()
	return gw, nil
}

// recordConnection records one connection or HTTP request, and tells jail
// of a denial.
func (g *gateway) recordConnection(e egressgw.Event) {
	d := &audit.NetDetail{
		Via: e.Via, Host: e.Host, Port: e.Port, Method: e.Method, Path: e.Path,
		Verdict: e.Verdict, Rule: e.Rule, Why: e.Reason, BytesUp: e.BytesUp, BytesDown: e.BytesDown,
	}
	if e.Client.IsValid() {
		d.Client = e.Client.String()
		d.PID, d.Exec = g.pids.pid(e.Client)
	}
	if e.Address.IsValid() {
		d.Address = e.Address.String()
	}
	g.write(audit.Event{Time: e.Time, Event: audit.Net, Duration: e.Duration, Net: d})
	if e.Verdict == egressgw.Denied && e.Host != "" {
		g.denied(e.Host, e.Port, e.Reason)
	}
}
