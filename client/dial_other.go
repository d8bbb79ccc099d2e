//go:build !linux

package client

import (
	"context"
	"errors"
	"net"
)

// dial refuses: the checks of the socket's directory and of the server's
// credentials that make a server worth a request are Linux's, as jail is.
// The package builds elsewhere for its types.
func dial(context.Context, string, []int) (net.Conn, error) {
	return nil, errors.New("jail: the client connects to a server on Linux only")
}
