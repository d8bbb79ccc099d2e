package control

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

//go:generate go run ./gen

// The body of a message is a flat binary encoding rather than JSON: a
// sandbox's init is a fresh process that decodes exactly one description,
// and encoding/json's first decode there (reflection over every type) cost
// a third of a millisecond on the path of every start; this costs
// microseconds. Integers are varints, strings and byte slices are
// length-prefixed, lists are counted, fields come in declaration order.
//
// The encoding of each type (wire_gen.go, and the C init's wire.h) is
// generated from the types themselves by ./gen, which describes the format;
// this file holds the primitives and the two entry points.

type writer struct {
	buf []byte
	err error
}

func (w *writer) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *writer) int(v int64)   { w.buf = binary.AppendVarint(w.buf, v) }

// string writes s; a NUL byte, which no C string can hold (the init
// refuses the message), fails the encoding here, where the error says why.
func (w *writer) string(s string) {
	if w.err == nil && strings.IndexByte(s, 0) >= 0 {
		w.err = fmt.Errorf("%q holds a NUL byte", s)
	}
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

// optionalBytes keeps a nil slice apart from an empty one, as the filter's
// optional second program needs.
func (w *writer) optionalBytes(b []byte) {
	w.bool(b != nil)
	if b != nil {
		w.uint(uint64(len(b)))
		w.buf = append(w.buf, b...)
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

// count reads a count of elements of at least min bytes each and checks it
// against what is left, so a corrupt message can never make the reader
// allocate more than the message could hold.
func (r *reader) count(min int) int {
	n := r.uint()
	if n > uint64(len(r.buf)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.count(1)
	if bytes.IndexByte(r.buf[:n], 0) >= 0 {
		r.fail()
		return ""
	}
	out := string(r.buf[:n])
	r.buf = r.buf[n:]
	return out
}

func (r *reader) bool() bool {
	if len(r.buf) == 0 || r.buf[0] > 1 {
		r.fail()
		return false
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b == 1
}

func (r *reader) optionalBytes() []byte {
	if !r.bool() {
		return nil
	}
	n := r.count(1)
	out := append([]byte{}, r.buf[:n]...)
	r.buf = r.buf[n:]
	return out
}

func (r *reader) intIn(lo, hi int64) int64 {
	v := r.int()
	if v < lo || v > hi {
		r.fail()
		return 0
	}
	return v
}

func (r *reader) uintAtMost(max uint64) uint64 {
	v := r.uint()
	if v > max {
		r.fail()
		return 0
	}
	return v
}

// encode returns m's body; it fails only on a string holding a NUL byte.
func encode(m Message) ([]byte, error) {
	w := &writer{buf: make([]byte, 0, 256)}
	w.uint(wireVersion)
	w.putMessage(&m)
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

// decode reads one whole body: anything short, malformed or followed by
// more bytes is an error.
func decode(body []byte) (Message, error) {
	r := &reader{buf: body}
	var m Message
	if v := r.uint(); r.err == nil && v != wireVersion {
		return m, errors.New("message from another version of jail")
	}
	r.getMessage(&m)
	if r.err == nil && len(r.buf) != 0 {
		r.fail()
	}
	if r.err != nil {
		return Message{}, r.err
	}
	return m, nil
}
