package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// refusal is a dial the rules (or the gateway's own checks) refused, as
// opposed to one that failed.
type refusal struct {
	rule   string
	reason string
}

func (r *refusal) Error() string { return "denied: " + r.reason }

// dialed is an upstream connection and how it was allowed.
type dialed struct {
	conn net.Conn
	addr netip.AddrPort
	rule string
	why  string
}

// dialChecked decides host:port, resolves a name host-side, checks every
// address it resolved to and dials the allowed ones in order, as addresses.
// host is canonical (rules.CanonicalHost). A denial is a *refusal; the
// connection returned is tracked (untrack it when done).
func (g *Gateway) dialChecked(ctx context.Context, host string, port int) (dialed, error) {
	d := g.rules.Decide(host, port)
	if !d.Allowed {
		return dialed{rule: d.Rule}, &refusal{rule: d.Rule, reason: d.Reason}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var candidates []netip.Addr
	var denial *refusal
	if literal, err := netip.ParseAddr(host); err == nil {
		// Decide allowed the address itself, by an address rule.
		candidates = []netip.Addr{literal}
	} else {
		resolved, err := g.resolve(ctx, host)
		if err != nil {
			return dialed{rule: d.Rule}, fmt.Errorf("resolving %s: %w", host, err)
		}
		for _, a := range resolved {
			a = a.WithZone("")
			ad := g.rules.AllowsAddress(a, port)
			if !ad.Allowed {
				// A name that resolves to a refused address among allowed
				// ones (a rebinding attempt, or a split horizon): the
				// refused ones are never dialed, the others may be.
				if denial == nil {
					denial = &refusal{rule: ad.Rule, reason: fmt.Sprintf("%s resolved to %s", host, ad.Reason)}
				}
				continue
			}
			candidates = append(candidates, a)
		}
	}
	var allowed []netip.Addr
	for _, a := range candidates {
		if !g.cfg.ListenersElsewhere && g.isListening(a, port) {
			if denial == nil {
				denial = &refusal{reason: fmt.Sprintf("%s is the gateway's own listener", netip.AddrPortFrom(a, uint16(port)))}
			}
			continue
		}
		allowed = append(allowed, a)
	}
	if len(allowed) == 0 {
		if denial == nil {
			return dialed{rule: d.Rule}, fmt.Errorf("%s resolved to no address", host)
		}
		if denial.rule == "" {
			denial.rule = d.Rule
		}
		return dialed{rule: d.Rule}, denial
	}
	var errs []error
	for _, a := range allowed {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		c, err := g.dial(ctx, "tcp", ap)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if !g.track(c) {
			return dialed{rule: d.Rule}, errClosing
		}
		return dialed{conn: c, addr: ap, rule: d.Rule, why: d.Reason}, nil
	}
	return dialed{rule: d.Rule}, fmt.Errorf("connecting to %s:%d: %w", host, port, errors.Join(errs...))
}
