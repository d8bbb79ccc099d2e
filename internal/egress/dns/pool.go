package dns

import (
	"net/netip"
	"sync"
)

// pool gives names addresses from a range, one-to-one and for good.
// Addresses are given in order from the range's second address on: which
// address a name gets says only how many names came before it, and only
// to the sandbox that asked.
type pool struct {
	first netip.Addr // the first address given
	max   int

	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr
}

func newPool(prefix netip.Prefix, max int) *pool {
	first := prefix.Addr().Next()
	return &pool{
		first:  first,
		max:    max,
		byName: make(map[string]netip.Addr),
		byAddr: make(map[netip.Addr]string),
		next:   first,
	}
}

// assign returns the address of a canonical name, giving it the next one
// when it has none; false when the pool is full.
func (p *pool) assign(name string) (netip.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byName[name]; ok {
		return a, true
	}
	if len(p.byName) >= p.max {
		return netip.Addr{}, false
	}
	a := p.next
	p.next = a.Next()
	p.byName[name] = a
	p.byAddr[a] = name
	return a, true
}

// lookup returns the name an address was given to.
func (p *pool) lookup(a netip.Addr) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, ok := p.byAddr[a]
	return name, ok
}

// size is the number of names given addresses.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byName)
}
