package gateway

import (
	"errors"
	"fmt"
	"io"
)

// MaxClientHello is the largest ClientHello handshake message read, in
// bytes: more than any real client sends (post-quantum key shares
// included), and one TLS record's worth.
const MaxClientHello = 16 << 10

// maxHelloRecords bounds the TLS records one ClientHello may be split
// over, so that the bytes read stay within MaxClientHello and the
// records' framing.
const maxHelloRecords = 8

// maxHelloRead is the most bytes readClientHello reads.
const maxHelloRead = 4 + MaxClientHello + maxHelloRecords*recordHeaderLen

const (
	recordHeaderLen      = 5
	maxRecordPayload     = 1 << 14 // TLSPlaintext.length (RFC 8446 5.1)
	recordHandshake      = 22
	handshakeClientHello = 1
	extServerName        = 0
	extECH               = 0xfe0d // encrypted_client_hello (RFC 9849)
	extESNI              = 0xffce // its draft predecessor, encrypted_server_name
	sniHostName          = 0
)

// clientHello is what the gateway needs of a ClientHello.
type clientHello struct {
	serverName string // the SNI host_name as sent, "" without one
	ech        bool   // an encrypted_client_hello (or ESNI) extension
}

// readClientHello reads from r the TLS records that carry a ClientHello,
// and nothing after them, and returns the bytes read (to be replayed to
// whoever handles the connection) and the ClientHello. Anything not a
// well-formed ClientHello within the bounds is an error.
func readClientHello(r io.Reader) ([]byte, clientHello, error) {
	var raw, msg []byte
	for records := 0; ; records++ {
		if records == maxHelloRecords {
			return raw, clientHello{}, fmt.Errorf("a ClientHello in more than %d records", maxHelloRecords)
		}
		start := len(raw)
		raw = append(raw, make([]byte, recordHeaderLen)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start], clientHello{}, fmt.Errorf("reading a TLS record header: %w", err)
		}
		h := raw[start:]
		if h[0] != recordHandshake {
			return raw, clientHello{}, fmt.Errorf("TLS record type %d, not a handshake", h[0])
		}
		if h[1] != 3 {
			return raw, clientHello{}, fmt.Errorf("TLS record version %d.%d", h[1], h[2])
		}
		n := int(h[3])<<8 | int(h[4])
		if n == 0 || n > maxRecordPayload {
			return raw, clientHello{}, fmt.Errorf("a TLS handshake record of %d bytes", n)
		}
		if len(msg) >= 4 {
			if want := 4 + handshakeLen(msg); len(msg)+n > want {
				return raw, clientHello{}, errors.New("more in the ClientHello's records than the ClientHello")
			}
		} else if len(msg)+n > maxHelloRead {
			return raw, clientHello{}, errors.New("a ClientHello too large")
		}
		start = len(raw)
		raw = append(raw, make([]byte, n)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start], clientHello{}, fmt.Errorf("reading a TLS record: %w", err)
		}
		msg = append(msg, raw[start:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeClientHello {
			return raw, clientHello{}, fmt.Errorf("TLS handshake message type %d, not a ClientHello", msg[0])
		}
		want := 4 + handshakeLen(msg)
		if want-4 > MaxClientHello {
			return raw, clientHello{}, fmt.Errorf("a ClientHello of %d bytes, more than %d", want-4, MaxClientHello)
		}
		if len(msg) > want {
			return raw, clientHello{}, errors.New("more in the ClientHello's records than the ClientHello")
		}
		if len(msg) == want {
			hello, err := parseClientHello(msg[4:])
			return raw, hello, err
		}
	}
}

// handshakeLen is the length field of a handshake message header.
func handshakeLen(msg []byte) int {
	return int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
}

// reader reads a TLS structure, failing (ok false) on any overrun.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) bytes(n int) []byte {
	if !r.ok || n < 0 || n > len(r.b) {
		r.ok = false
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint8() int {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *reader) uint16() int {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}

// vector reads a vector with an n-byte length prefix (n 1 or 2).
func (r *reader) vector(n int) *reader {
	var l int
	if n == 1 {
		l = r.uint8()
	} else {
		l = r.uint16()
	}
	return &reader{b: r.bytes(l), ok: r.ok}
}

// parseClientHello parses a ClientHello's body (RFC 8446 4.1.2, which
// TLS 1.0 to 1.2 share): the server name and whether ECH is offered.
// Every length is checked against what holds it, nothing may trail, and an
// extension may appear once.
func parseClientHello(body []byte) (clientHello, error) {
	r := &reader{b: body, ok: true}
	r.bytes(2)  // legacy_version
	r.bytes(32) // random
	if sid := r.vector(1); len(sid.b) > 32 {
		return clientHello{}, errors.New("a ClientHello session id longer than 32 bytes")
	}
	if suites := r.vector(2); len(suites.b) == 0 || len(suites.b)%2 != 0 {
		return clientHello{}, errors.New("a ClientHello with a malformed cipher suite list")
	}
	if methods := r.vector(1); len(methods.b) == 0 {
		return clientHello{}, errors.New("a ClientHello with no compression method")
	}
	if !r.ok {
		return clientHello{}, errors.New("a truncated ClientHello")
	}
	var hello clientHello
	if len(r.b) == 0 {
		return hello, nil // no extensions (TLS 1.2 and older may)
	}
	exts := r.vector(2)
	if !r.ok || len(r.b) != 0 {
		return clientHello{}, errors.New("a ClientHello with malformed extensions")
	}
	seen := make(map[int]bool)
	for len(exts.b) > 0 {
		typ := exts.uint16()
		data := exts.vector(2)
		if !exts.ok {
			return clientHello{}, errors.New("a ClientHello with a truncated extension")
		}
		if seen[typ] {
			return clientHello{}, fmt.Errorf("a ClientHello with extension %d twice", typ)
		}
		seen[typ] = true
		switch typ {
		case extECH, extESNI:
			hello.ech = true
		case extServerName:
			name, err := parseServerName(data)
			if err != nil {
				return clientHello{}, err
			}
			hello.serverName = name
		}
	}
	return hello, nil
}

// parseServerName parses the server_name extension (RFC 6066 3): exactly
// one host_name, a name of letters, digits, hyphens and dots.
func parseServerName(data *reader) (string, error) {
	list := data.vector(2)
	if !data.ok || len(data.b) != 0 || len(list.b) == 0 {
		return "", errors.New("a malformed server_name extension")
	}
	var name string
	for len(list.b) > 0 {
		typ := list.uint8()
		n := list.vector(2)
		if !list.ok {
			return "", errors.New("a malformed server_name extension")
		}
		if typ != sniHostName {
			continue
		}
		if name != "" {
			return "", errors.New("a server_name extension with two host names")
		}
		if len(n.b) == 0 || len(n.b) > 255 {
			return "", errors.New("a server_name of a bad length")
		}
		for _, c := range n.b {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return "", fmt.Errorf("a server_name with the byte %q", c)
			}
		}
		name = string(n.b)
	}
	if name == "" {
		return "", errors.New("a server_name extension without a host name")
	}
	return name, nil
}
