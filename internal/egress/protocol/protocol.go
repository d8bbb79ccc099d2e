// Package protocol is what jail and its gateway program
// (internal/programs/gateway) say to each other, and where the gateway's
// sockets sit inside a sandbox (docs/egress.md).
//
// The two talk over a SOCK_SEQPACKET socket pair, one JSON message per
// packet, descriptors attached as SCM_RIGHTS:
//
//	jail → gateway   Config            once, first
//	gateway → jail   Hello             the rules parsed (or why not), the
//	                                   trust anchor and placeholders
//	jail → gateway   Start             the sandbox's listeners attached, in
//	                                   Listeners' order, then the init's
//	                                   pidfd (always when Config.Detached)
//	gateway → jail   Event ...         denials, while Config.Events
//
// Invariants:
//   - The package links nothing heavy: the jail command imports it, and
//     must not link net/http (internal/programs' links test).
//   - Secret values travel only in Config, jail to gateway, never back:
//     the gateway answers with placeholders, which are what the sandbox
//     sees.
//   - A message is at most MaxMessage bytes; a longer one is an error,
//     never a partial read.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MaxMessage bounds one message: a Config carries at most
// maxSecrets values of the secret store's size and the rules.
const MaxMessage = 4 << 20

// ProxyPort and SOCKSPort are the gateway's proxies on the sandbox's
// 127.0.0.1; DNSAddress is its resolver.
const (
	ProxyPort  = 3128
	SOCKSPort  = 1080
	DNSAddress = "127.0.0.53"
)

// Listener is one socket the sandbox's init opens for the gateway.
type Listener struct {
	Name    string
	Stream  bool
	Address string
	Port    int
}

// Listeners are the gateway's sockets in the sandbox's network namespace,
// in the order Start attaches them. Ports 80 and 443 are bound on every
// address: the sandbox's resolver gives allowed names addresses of
// 127.0.0.0/8, and what arrives for an address it did not give (the
// sandbox's own 127.0.0.1) is refused by the gateway.
var Listeners = [...]Listener{
	{Name: "proxy", Stream: true, Address: "127.0.0.1", Port: ProxyPort},
	{Name: "socks", Stream: true, Address: "127.0.0.1", Port: SOCKSPort},
	{Name: "dns-udp", Stream: false, Address: DNSAddress, Port: 53},
	{Name: "dns-tcp", Stream: true, Address: DNSAddress, Port: 53},
	{Name: "http", Stream: true, Address: "0.0.0.0", Port: 80},
	{Name: "tls", Stream: true, Address: "0.0.0.0", Port: 443},
}

// ResolvConf is the sandbox's /etc/resolv.conf.
const ResolvConf = "# jail: names are resolved by jail's egress gateway (docs/egress.md)\nnameserver " + DNSAddress + "\noptions edns0 trust-ad\n"

// Config is what the gateway serves one sandbox with.
type Config struct {
	// Rules is --net allow='s list, as written; the gateway parses it
	// (the jail command cannot: the public-suffix list links net/http).
	Rules string `json:"rules"`
	// Sandbox and Labels name the sandbox in the audit log; UID is who
	// asked for it.
	Sandbox string            `json:"sandbox,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	UID     int               `json:"uid"`
	// Audit is the audit log's path; "" writes none.
	Audit string `json:"audit,omitempty"`
	// Limits bound the sandbox's use of the host's network.
	Limits Limits `json:"limits"`
	// Secrets are the values bound to hosts (--secret NAME@HOST).
	Secrets []Secret `json:"secrets,omitempty"`
	// Detached: the gateway of a persistent sandbox, which outlives the
	// jail process that started it; it ends when the init does (its pidfd,
	// attached to Start), not when this socket hangs up.
	Detached bool `json:"detached,omitempty"`
	// Events: send an Event for each denial while this socket is open
	// (the command's stderr says them).
	Events bool `json:"events,omitempty"`
}

// Limits are a sandbox's network limits; 0 is the default (MaxConns) or
// none (MaxBytes, Rate).
type Limits struct {
	MaxConns int   `json:"max_conns,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
	Rate     int64 `json:"rate,omitempty"` // bytes per second, both ways
}

// Secret is a value bound to hosts: the sandbox gets a placeholder in its
// place, which the gateway replaces in requests to those hosts only.
type Secret struct {
	Name  string   `json:"name"`
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
}

// Hello is the gateway's answer to Config.
type Hello struct {
	// Error, when set, is why the gateway refused Config, a "jail: ..."
	// line for the user; it then ends.
	Error string `json:"error,omitempty"`
	// CA is the PEM of the per-sandbox certificate authority that signs
	// the bound hosts' certificates, when secrets are bound; the sandbox
	// trusts it.
	CA string `json:"ca,omitempty"`
	// Placeholders are what the sandbox gets in each bound secret's place.
	Placeholders map[string]string `json:"placeholders,omitempty"`
}

// Start hands the gateway its listeners (attached), and after them the
// init's pidfd when Pidfd.
type Start struct {
	Listeners int  `json:"listeners"`
	Pidfd     bool `json:"pidfd,omitempty"`
}

// Event is one denial, for the command's stderr.
type Event struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
}

// Send sends v as one message on the socket fd, with files attached.
func Send(fd int, v any, files ...*os.File) error {
	return send(fd, v, 0, files)
}

// SendNoWait is Send that fails (EAGAIN) rather than wait for room.
func SendNoWait(fd int, v any) error {
	return send(fd, v, unix.MSG_DONTWAIT, nil)
}

func send(fd int, v any, flags int, files []*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("egress protocol: message of %d bytes, at most %d", len(b), MaxMessage)
	}
	// A packet is at most the socket's send buffer (some hundreds of
	// KiB); a larger message (a configuration with large secrets) goes in
	// a sealed memfd attached after the files.
	packet := append([]byte{inline}, b...)
	if len(b) > maxInline {
		memfd, err := sealedCopy(b)
		if err != nil {
			return err
		}
		defer memfd.Close()
		files = append(append([]*os.File(nil), files...), memfd)
		packet = []byte{inMemfd}
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	for {
		err = unix.Sendmsg(fd, packet, oob, nil, unix.MSG_NOSIGNAL|flags)
		if err != unix.EINTR {
			break
		}
	}
	return err
}

// The first byte of a packet says where its message is.
const (
	inline  = 'J' // the rest of the packet
	inMemfd = 'M' // the last file attached, a sealed memfd
)

// maxInline is the largest message sent in its packet.
const maxInline = 32 << 10

// sealedCopy is a memfd holding b, sealed against any change.
func sealedCopy(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("jail-egress-message", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("egress protocol: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "jail-egress-message")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("egress protocol: memfd: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("egress protocol: seal: %w", err)
	}
	return f, nil
}

// readSealed reads a message from a memfd sealed as sealedCopy seals it,
// of at most limit bytes.
func readSealed(f *os.File, limit int) ([]byte, error) {
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	want := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if err != nil || seals&want != want {
		return nil, errors.New("egress protocol: a message in an unsealed file")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Size > int64(limit) {
		return nil, fmt.Errorf("egress protocol: message of %d bytes, at most %d", st.Size, limit)
	}
	b := make([]byte, st.Size)
	if _, err := f.ReadAt(b, 0); err != nil && int64(len(b)) != 0 {
		return nil, fmt.Errorf("egress protocol: %w", err)
	}
	return b, nil
}

// ErrClosed is what Recv returns once the other end has hung up.
var ErrClosed = errors.New("egress protocol: closed")

// Recv reads one message of at most maxBytes (at most MaxMessage) on the
// socket fd into v, and the files attached (close-on-exec). A message
// with more than maxFiles files, cut short, or in an unsealed memfd is an
// error; its files are closed.
func Recv(fd int, v any, maxBytes, maxFiles int) ([]*os.File, error) {
	buf := make([]byte, min(maxBytes, MaxMessage)+1)
	// One more than maxFiles: a message that came in a memfd.
	oob := make([]byte, unix.CmsgSpace(4*(maxFiles+1)))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			// Whatever descriptors came cannot be named: none is kept.
			return nil, perr
		}
		for _, m := range msgs {
			fds, rerr := unix.ParseUnixRights(&m)
			if rerr != nil {
				continue
			}
			for _, f := range fds {
				files = append(files, os.NewFile(uintptr(f), "egress"))
			}
		}
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n >= len(buf) {
		return fail(errors.New("egress protocol: message cut short, or too many files"))
	}
	if n == 0 && oobn == 0 {
		return nil, ErrClosed
	}
	var body []byte
	switch {
	case n >= 1 && buf[0] == inline:
		body = buf[1:n]
	case n == 1 && buf[0] == inMemfd && len(files) > 0:
		memfd := files[len(files)-1]
		files = files[:len(files)-1]
		var err error
		body, err = readSealed(memfd, min(maxBytes, MaxMessage))
		memfd.Close()
		if err != nil {
			return fail(err)
		}
	default:
		return fail(errors.New("egress protocol: a packet of no known form"))
	}
	if len(files) > maxFiles {
		return fail(fmt.Errorf("egress protocol: %d files, at most %d", len(files), maxFiles))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fail(fmt.Errorf("egress protocol: %w", err))
	}
	return files, nil
}
