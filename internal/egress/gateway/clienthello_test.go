package gateway

import (
	"bytes"
	"strings"
	"testing"
)

// helloSpec builds a ClientHello by hand, for what crypto/tls never sends.
type helloSpec struct {
	names     []string // host_name entries of server_name; none: no extension
	ech       bool
	dupExt    bool
	noExts    bool
	padding   int // bytes of a padding extension
	recordLen int // split the message into records of this size; 0: one
}

func u16(n int) []byte { return []byte{byte(n >> 8), byte(n)} }

func (s helloSpec) message() []byte {
	var body []byte
	body = append(body, 3, 3)
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)             // session id
	body = append(body, 0, 2, 0x13, 1) // one cipher suite
	body = append(body, 1, 0)          // null compression
	if !s.noExts {
		var exts []byte
		if len(s.names) > 0 {
			var list []byte
			for _, n := range s.names {
				list = append(list, 0)
				list = append(list, u16(len(n))...)
				list = append(list, n...)
			}
			sni := append(u16(len(list)), list...)
			exts = append(exts, u16(extServerName)...)
			exts = append(exts, u16(len(sni))...)
			exts = append(exts, sni...)
		}
		if s.ech {
			exts = append(exts, u16(extECH)...)
			exts = append(exts, 0, 4, 0, 1, 2, 3)
		}
		if s.dupExt {
			exts = append(exts, 0, 43, 0, 0, 0, 43, 0, 0)
		}
		if s.padding > 0 {
			exts = append(exts, 0, 21)
			exts = append(exts, u16(s.padding)...)
			exts = append(exts, make([]byte, s.padding)...)
		}
		body = append(body, u16(len(exts))...)
		body = append(body, exts...)
	}
	msg := []byte{handshakeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

func (s helloSpec) records() []byte {
	msg := s.message()
	size := s.recordLen
	if size == 0 {
		size = maxRecordPayload
	}
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordHandshake, 3, 1)
		out = append(out, u16(n)...)
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func TestReadClientHello(t *testing.T) {
	crypto := clientHelloBytes(t, "Allowed.Test")
	tests := []struct {
		name    string
		in      []byte
		sni     string
		ech     bool
		wantErr string
	}{
		{name: "crypto/tls with a server name", in: crypto, sni: "Allowed.Test"},
		{name: "crypto/tls without a server name", in: clientHelloBytes(t, ""), sni: ""},
		{name: "hand-built", in: helloSpec{names: []string{"a.test"}}.records(), sni: "a.test"},
		{name: "no extensions", in: helloSpec{noExts: true}.records()},
		{name: "split over records of 7 bytes", in: helloSpec{names: []string{"a.test"}, recordLen: 7, padding: 10}.records(), wantErr: "more than 8 records"},
		{name: "split over records of 40 bytes", in: helloSpec{names: []string{"a.test"}, recordLen: 40}.records(), sni: "a.test"},
		{name: "ECH", in: helloSpec{names: []string{"cover.test"}, ech: true}.records(), sni: "cover.test", ech: true},
		{name: "two host names", in: helloSpec{names: []string{"a.test", "b.test"}}.records(), wantErr: "two host names"},
		{name: "an extension twice", in: helloSpec{dupExt: true}.records(), wantErr: "twice"},
		{name: "a name with a NUL", in: helloSpec{names: []string{"a.test\x00.evil"}}.records(), wantErr: "byte"},
		{name: "the largest", in: helloSpec{padding: MaxClientHello - 100, recordLen: 8 << 10}.records()},
		{name: "too large", in: helloSpec{padding: MaxClientHello, recordLen: 8 << 10}.records(), wantErr: "more than"},
		{name: "not a handshake record", in: []byte{23, 3, 3, 0, 1, 0}, wantErr: "not a handshake"},
		{name: "an empty record", in: []byte{22, 3, 1, 0, 0}, wantErr: "of 0 bytes"},
		{name: "not a ClientHello", in: []byte{22, 3, 1, 0, 4, 2, 0, 0, 0}, wantErr: "not a ClientHello"},
		{name: "truncated", in: crypto[:len(crypto)-3], wantErr: "EOF"},
		{name: "a record longer than the message", in: append(append([]byte{}, helloSpec{}.records()...), 0), wantErr: ""},
		{name: "garbage in the record after the message", in: func() []byte {
			b := helloSpec{names: []string{"a.test"}}.records()
			b[4]++ // the record is one byte longer than the ClientHello
			return append(b, 0)
		}(), wantErr: "more in the ClientHello's records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, hello, err := readClientHello(bytes.NewReader(tt.in))
			if !bytes.HasPrefix(tt.in, raw) {
				t.Fatalf("the bytes read are not a prefix of the input")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if hello.serverName != tt.sni || hello.ech != tt.ech {
				t.Fatalf("got %+v, want server name %q, ech %v", hello, tt.sni, tt.ech)
			}
		})
	}
}

// FuzzReadClientHello: no input panics, the bytes read are a prefix of the
// input within the bound, and a ClientHello parsed has a server name made
// only of the bytes a name may hold.
func FuzzReadClientHello(f *testing.F) {
	f.Add(clientHelloBytes(f, "allowed.test"))
	f.Add(clientHelloBytes(f, ""))
	f.Add(helloSpec{names: []string{"a.test"}, ech: true}.records())
	f.Add(helloSpec{names: []string{"a.test"}, recordLen: 30}.records())
	f.Add(helloSpec{noExts: true}.records())
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, hello, err := readClientHello(bytes.NewReader(in))
		if !bytes.HasPrefix(in, raw) {
			t.Fatal("the bytes read are not a prefix of the input")
		}
		if len(raw) > maxHelloRead {
			t.Fatalf("read %d bytes, more than %d", len(raw), maxHelloRead)
		}
		if err != nil {
			return
		}
		for _, c := range []byte(hello.serverName) {
			if c <= ' ' || c >= 0x7f || c == ':' || c == '/' {
				t.Fatalf("server name %q", hello.serverName)
			}
		}
	})
}
