package control

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/jail-sandbox/jail/internal/config"
)

// The body of a message is a flat binary encoding rather than JSON: a
// sandbox's init is a fresh process that decodes exactly one description,
// and encoding/json's first decode there (reflection over every type) cost
// a third of a millisecond on the path of every start; this costs
// microseconds. Integers are varints, strings and byte slices are
// length-prefixed, lists are counted, fields come in declaration order.
// TestWireRoundTrip fills every field of every type and fails when a field
// is added to a type but not here.

// wireVersion starts every body; a peer of another build is refused.
const wireVersion = 1

type writer struct{ buf []byte }

func (w *writer) uint(v uint64)  { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *writer) int(v int64)    { w.buf = binary.AppendVarint(w.buf, v) }
func (w *writer) bytes(b []byte) { w.uint(uint64(len(b))); w.buf = append(w.buf, b...) }
func (w *writer) string(s string) {
	w.uint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *writer) bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *writer) strings(list []string) {
	w.uint(uint64(len(list)))
	for _, s := range list {
		w.string(s)
	}
}

// optionalBytes keeps a nil slice apart from an empty one, as the filter's
// optional second program needs.
func (w *writer) optionalBytes(b []byte) {
	w.bool(b != nil)
	if b != nil {
		w.bytes(b)
	}
}

var errShort = errors.New("truncated or malformed message")

type reader struct {
	buf []byte
	err error
}

func (r *reader) fail() { r.err, r.buf = errShort, nil }

func (r *reader) uint() uint64 {
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) int() int64 {
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// count reads a length and checks it against what is left, so a corrupt
// message can never make the reader allocate more than the message holds.
func (r *reader) count() int {
	n := r.uint()
	if n > uint64(len(r.buf)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.count()
	out := append([]byte{}, r.buf[:n]...)
	r.buf = r.buf[n:]
	return out
}

func (r *reader) string() string {
	n := r.count()
	out := string(r.buf[:n])
	r.buf = r.buf[n:]
	return out
}

func (r *reader) bool() bool {
	if len(r.buf) == 0 {
		r.fail()
		return false
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	if b > 1 {
		r.fail()
	}
	return b == 1
}

func (r *reader) strings() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

func (r *reader) optionalBytes() []byte {
	if !r.bool() {
		return nil
	}
	return r.bytes()
}

func (r *reader) intIn(lo, hi int64) int64 {
	v := r.int()
	if v < lo || v > hi {
		r.fail()
	}
	return v
}

func (r *reader) uintBelow(max uint64) uint64 {
	v := r.uint()
	if v > max {
		r.fail()
	}
	return v
}

func encode(m Message) []byte {
	w := &writer{buf: make([]byte, 0, 256)}
	w.uint(wireVersion)
	w.string(m.Kind)
	w.string(m.Step)
	w.string(m.Reason)
	w.int(int64(m.Code))
	w.int(int64(m.Signal))
	w.int(int64(m.Pid))
	w.int(m.Running)
	w.int(m.Built)
	w.bool(m.Config != nil)
	if c := m.Config; c != nil {
		encodeConfig(w, c)
	}
	w.bool(m.Process != nil)
	if p := m.Process; p != nil {
		encodeProcess(w, p)
	}
	w.bool(m.Spawn != nil)
	if sp := m.Spawn; sp != nil {
		encodeSpawn(w, sp)
	}
	return w.buf
}

func encodeSpawn(w *writer, sp *Spawn) {
	w.string(sp.Path)
	w.strings(sp.Args)
	w.strings(sp.Env)
	for _, b := range []bool{sp.Stdin, sp.Stdout, sp.Stderr, sp.CgroupDir, sp.Program} {
		w.bool(b)
	}
	w.uint(sp.Cloneflags)
	for _, m := range [][]IDMap{sp.UIDMap, sp.GIDMap} {
		w.uint(uint64(len(m)))
		for _, line := range m {
			w.int(int64(line.ContainerID))
			w.int(int64(line.HostID))
			w.int(int64(line.Size))
		}
	}
	w.bool(sp.Setgroups)
	w.bool(sp.Credential)
	w.uint(uint64(sp.UID))
	w.uint(uint64(sp.GID))
	w.uint(uint64(len(sp.AmbientCaps)))
	for _, c := range sp.AmbientCaps {
		w.uint(c)
	}
	w.bool(sp.Setsid)
	w.int(int64(sp.Pdeathsig))
	w.strings(sp.CgroupEnter)
	w.strings(sp.CgroupLeave)
	w.int(int64(sp.Owner))
}

func decodeSpawn(r *reader) *Spawn {
	sp := &Spawn{Path: r.string(), Args: r.strings(), Env: r.strings()}
	for _, b := range []*bool{&sp.Stdin, &sp.Stdout, &sp.Stderr, &sp.CgroupDir, &sp.Program} {
		*b = r.bool()
	}
	sp.Cloneflags = r.uint()
	for _, m := range []*[]IDMap{&sp.UIDMap, &sp.GIDMap} {
		if n := r.count(); n > 0 {
			*m = make([]IDMap, n)
			for i := range *m {
				(*m)[i] = IDMap{
					ContainerID: int(r.intIn(0, math.MaxUint32)),
					HostID:      int(r.intIn(0, math.MaxUint32)),
					Size:        int(r.intIn(0, math.MaxUint32)),
				}
			}
		}
	}
	sp.Setgroups = r.bool()
	sp.Credential = r.bool()
	sp.UID = uint32(r.uintBelow(math.MaxUint32))
	sp.GID = uint32(r.uintBelow(math.MaxUint32))
	if n := r.count(); n > 0 {
		sp.AmbientCaps = make([]uint64, n)
		for i := range sp.AmbientCaps {
			sp.AmbientCaps[i] = r.uintBelow(63)
		}
	}
	sp.Setsid = r.bool()
	sp.Pdeathsig = int(r.intIn(0, 64))
	sp.CgroupEnter = r.strings()
	sp.CgroupLeave = r.strings()
	sp.Owner = int(r.intIn(-1, math.MaxUint32))
	return sp
}

func encodeConfig(w *writer, c *config.Init) {
	w.bool(c.Rootfs.HostTree)
	w.uint(uint64(len(c.Rootfs.Lowers)))
	for _, l := range c.Rootfs.Lowers {
		w.string(l.Path)
		w.uint(l.Dev)
		w.uint(l.Ino)
	}
	w.bool(c.Rootfs.ReadOnly)
	w.string(c.Rootfs.Home)
	w.uint(uint64(len(c.Mounts)))
	for _, m := range c.Mounts {
		w.string(m.Source)
		w.uint(m.SourceDev)
		w.uint(m.SourceIno)
		w.int(int64(m.SourceUID))
		w.int(int64(m.SourceGID))
		w.bool(m.SourceIsDir)
		w.string(m.Destination)
		w.bool(m.Writable)
		w.int(int64(m.FD))
	}
	w.string(c.Hostname)
	encodeProcess(w, &c.Process)
	l := c.Limits
	for _, v := range []int64{l.TmpSize, l.RunSize, l.ShmSize, l.UpperSize, l.HomeSize, l.RlimitData, l.RlimitNproc, l.SysVShm, l.RlimitStack} {
		w.int(v)
	}
	w.strings(c.Masks)
	w.strings(c.ReadOnly)
	w.optionalBytes(c.Seccomp.Allowlist)
	w.optionalBytes(c.Seccomp.Denials)
	w.optionalBytes(c.Seccomp.Guard)
	w.bool(c.EnterCgroup)
	w.bool(c.TakeRoot)
	w.uint(c.Capabilities)
}

func encodeProcess(w *writer, p *config.Process) {
	w.strings(p.Args)
	w.strings(p.Env)
	w.string(p.Cwd)
	w.uint(uint64(p.UID))
	w.uint(uint64(p.GID))
	w.bool(p.SwitchUser)
	w.bool(p.TTY)
	w.uint(uint64(p.Rows))
	w.uint(uint64(p.Cols))
}

func decode(body []byte) (Message, error) {
	r := &reader{buf: body}
	var m Message
	if v := r.uint(); r.err == nil && v != wireVersion {
		return m, errors.New("message from another version of jail")
	}
	m.Kind = r.string()
	m.Step = r.string()
	m.Reason = r.string()
	m.Code = int(r.intIn(math.MinInt32, math.MaxInt32))
	m.Signal = int(r.intIn(0, 128))
	m.Pid = int(r.intIn(0, math.MaxInt32))
	m.Running = r.int()
	m.Built = r.int()
	if r.bool() {
		m.Config = decodeConfig(r)
	}
	if r.bool() {
		m.Process = &config.Process{}
		decodeProcess(r, m.Process)
	}
	if r.bool() {
		m.Spawn = decodeSpawn(r)
	}
	if r.err == nil && len(r.buf) != 0 {
		r.fail()
	}
	return m, r.err
}

func decodeConfig(r *reader) *config.Init {
	c := &config.Init{}
	c.Rootfs.HostTree = r.bool()
	if n := r.count(); n > 0 {
		c.Rootfs.Lowers = make([]config.Layer, n)
		for i := range c.Rootfs.Lowers {
			c.Rootfs.Lowers[i] = config.Layer{Path: r.string(), Dev: r.uint(), Ino: r.uint()}
		}
	}
	c.Rootfs.ReadOnly = r.bool()
	c.Rootfs.Home = r.string()
	if n := r.count(); n > 0 {
		c.Mounts = make([]config.Mount, n)
		for i := range c.Mounts {
			m := &c.Mounts[i]
			m.Source = r.string()
			m.SourceDev = r.uint()
			m.SourceIno = r.uint()
			m.SourceUID = int(r.intIn(-1, math.MaxUint32))
			m.SourceGID = int(r.intIn(-1, math.MaxUint32))
			m.SourceIsDir = r.bool()
			m.Destination = r.string()
			m.Writable = r.bool()
			m.FD = int(r.intIn(-1, math.MaxInt32))
		}
	}
	c.Hostname = r.string()
	decodeProcess(r, &c.Process)
	l := &c.Limits
	for _, v := range []*int64{&l.TmpSize, &l.RunSize, &l.ShmSize, &l.UpperSize, &l.HomeSize, &l.RlimitData, &l.RlimitNproc, &l.SysVShm, &l.RlimitStack} {
		*v = r.int()
	}
	c.Masks = r.strings()
	c.ReadOnly = r.strings()
	c.Seccomp.Allowlist = r.optionalBytes()
	c.Seccomp.Denials = r.optionalBytes()
	c.Seccomp.Guard = r.optionalBytes()
	c.EnterCgroup = r.bool()
	c.TakeRoot = r.bool()
	c.Capabilities = r.uint()
	return c
}

func decodeProcess(r *reader, p *config.Process) {
	p.Args = r.strings()
	p.Env = r.strings()
	p.Cwd = r.string()
	p.UID = uint32(r.uintBelow(math.MaxUint32))
	p.GID = uint32(r.uintBelow(math.MaxUint32))
	p.SwitchUser = r.bool()
	p.TTY = r.bool()
	p.Rows = uint16(r.uintBelow(math.MaxUint16))
	p.Cols = uint16(r.uintBelow(math.MaxUint16))
}
