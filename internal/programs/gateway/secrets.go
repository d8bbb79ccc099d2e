package main

import (
	"fmt"
	"strings"

	"github.com/jail-sandbox/jail/internal/egress/mitm"
	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// bindSecrets makes the per-sandbox authority and the placeholders of the
// secrets bound to hosts (--secret NAME@HOST), each host one the rules
// allow; a refusal is a "jail: ..." line, which never holds a value.
func (g *gateway) bindSecrets() string {
	if len(g.cfg.Secrets) == 0 {
		return ""
	}
	bindings := make([]mitm.Binding, 0, len(g.cfg.Secrets))
	for _, s := range g.cfg.Secrets {
		flag := "--secret " + s.Name + "@" + strings.Join(s.Hosts, ",")
		for _, h := range s.Hosts {
			host, err := rules.CanonicalHost(h)
			if err != nil {
				return fmt.Sprintf("jail: %s: %q: %v", flag, h, err)
			}
			if d := g.rules.DecideName(host); !d.Allowed {
				return fmt.Sprintf("jail: %s: --net allow= does not allow %s (%s)", flag, host, d.Reason)
			}
		}
		value := s.Value
		bindings = append(bindings, mitm.Binding{Name: s.Name, Value: &value, Hosts: s.Hosts})
	}
	// The values live in the bindings from here on, not in the
	// configuration.
	g.cfg.Secrets = nil
	secrets, err := mitm.NewSecrets(g.cfg.Sandbox, bindings, mitm.Options{})
	if err != nil {
		return fmt.Sprintf("jail: --secret: %v", err)
	}
	g.secrets = secrets
	g.hello.CA = string(secrets.Authority().CertificatePEM())
	g.hello.Placeholders = make(map[string]string)
	for _, e := range secrets.Placeholders() {
		if name, ph, ok := strings.Cut(e, "="); ok {
			g.hello.Placeholders[name] = ph
		}
	}
	return ""
}
