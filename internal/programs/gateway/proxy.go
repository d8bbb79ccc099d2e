package main

import "net"

// startProxies serves the proxies and the captured ports (the listeners
// other than the resolver's).
func (g *gateway) startProxies(listeners map[string]net.Listener) (interface{ Close() error }, error) {
	closer := listenersCloser{}
	for name, l := range listeners {
		if name != "dns-tcp" {
			closer = append(closer, l)
		}
	}
	return closer, nil
}

type listenersCloser []net.Listener

func (c listenersCloser) Close() error {
	for _, l := range c {
		l.Close()
	}
	return nil
}
