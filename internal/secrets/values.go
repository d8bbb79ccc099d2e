package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Values are resolved secrets, in memory, by name. Printing them (%v, %s,
// %#v, ...) or encoding them as JSON shows their names only; so does
// printing a struct that holds them, even in an unexported field, where
// fmt cannot call their methods and reads their fields instead: each
// value is behind two pointers, and fmt expands at most one (a pointer it
// cannot print with the verb asked for), printing the addresses of the
// pointers beyond. The zero Values hold none.
type Values struct {
	set *valueSet
}

type valueSet struct{ entries []entry }

// entry is one value: see Values for why it is a pointer.
type entry struct {
	name  string
	value *string
}

func (v Values) list() []entry {
	if v.set == nil {
		return nil
	}
	return v.set.entries
}

// Len is how many values there are.
func (v Values) Len() int { return len(v.list()) }

// Names are the names, in the order they were resolved.
func (v Values) Names() []string {
	names := make([]string, len(v.list()))
	for i, e := range v.list() {
		names[i] = e.name
	}
	return names
}

// Value returns the value of name.
func (v Values) Value(name string) (string, bool) {
	for _, e := range v.list() {
		if e.name == name {
			return *e.value, true
		}
	}
	return "", false
}

// Env returns NAME=value entries, in order, for a command's environment
// (appended after the variables they override).
func (v Values) Env() []string {
	env := make([]string, len(v.list()))
	for i, e := range v.list() {
		env[i] = e.name + "=" + *e.value
	}
	return env
}

// Redact returns s with each value replaced as a Redactor replaces it.
func (v Values) Redact(s string) string {
	var b strings.Builder
	r := NewRedactor(&b, v)
	_, _ = r.Write([]byte(s))
	_ = r.Flush()
	return b.String()
}

// String shows the names only: "secrets[A B]".
func (v Values) String() string { return fmt.Sprintf("secrets%v", v.Names()) }

// GoString shows the names only.
func (v Values) GoString() string { return v.String() }

// Format prints the names only, whatever the verb, so that no verb that
// reads fields by reflection can print a value.
func (v Values) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, v.String()) }

// MarshalJSON encodes the names only.
func (v Values) MarshalJSON() ([]byte, error) { return json.Marshal(v.Names()) }

// Redactor writes what is written to it to another writer with every exact
// occurrence of a non-empty secret value replaced by [secret:NAME], also
// when an occurrence is split across writes: it holds back the bytes that
// may begin one (at most the longest value's length less one) until the
// next write decides, or Flush or Close. Where values overlap it replaces
// as strings.NewReplacer given them longest first does: scanning from the
// left, at each position the longest value that occurs there; values
// alike in length and content under two names read as the name first in
// order.
//
// A Redactor serializes its calls, so several goroutines may use one, but
// a value is recognized only within the order of the bytes written: give
// each stream (stdout, stderr) its own Redactor. After an error of the
// underlying writer every call returns that error.
type Redactor struct {
	mu  sync.Mutex
	w   io.Writer
	err error
	// s holds the values and the bytes held back, behind pointers as
	// Values holds its values, so that printing a Redactor shows none.
	s *redactState
}

type redactState struct {
	patterns []*pattern // longest first
	starts   [256]bool  // the first bytes of the patterns
	held     *[]byte
	out      *[]byte // reused for each write
}

type pattern struct {
	name        string
	value       []byte
	placeholder []byte
}

// errClosed is returned by a write to a closed Redactor.
var errClosed = errors.New("secrets: write to a closed Redactor")

// NewRedactor returns a Redactor of the values of v writing to w.
func NewRedactor(w io.Writer, v Values) *Redactor {
	s := &redactState{held: new([]byte), out: new([]byte)}
	for _, e := range v.list() {
		if *e.value == "" {
			continue
		}
		s.patterns = append(s.patterns, &pattern{e.name, []byte(*e.value), []byte("[secret:" + e.name + "]")})
		s.starts[(*e.value)[0]] = true
	}
	slices.SortStableFunc(s.patterns, func(a, b *pattern) int {
		if len(a.value) != len(b.value) {
			return len(b.value) - len(a.value)
		}
		return strings.Compare(a.name, b.name)
	})
	return &Redactor{w: w, s: s}
}

// Write replaces the values in what it can decide of the bytes held and p,
// writes that to the underlying writer in one call, and holds back the
// rest. It returns len(p) when that write succeeded.
func (r *Redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	*r.s.held = append(*r.s.held, p...)
	if err := r.emit(false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the bytes held back, replaced where they hold a whole
// value.
func (r *Redactor) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	return r.emit(true)
}

// Close flushes the Redactor; later writes fail. It does not close the
// underlying writer.
func (r *Redactor) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		if r.err == errClosed {
			return nil
		}
		return r.err
	}
	err := r.emit(true)
	if err == nil {
		r.err = errClosed
	}
	return err
}

// emit replaces and writes what can be decided of r.held (all of it when
// final) and keeps the rest in r.held.
func (r *Redactor) emit(final bool) error {
	s := r.s
	buf := *s.held
	out := (*s.out)[:0]
	start, i := 0, 0
scan:
	for i < len(buf) {
		if !s.starts[buf[i]] {
			i++
			continue
		}
		tail := buf[i:]
		for _, p := range s.patterns {
			if len(tail) >= len(p.value) {
				if bytes.HasPrefix(tail, p.value) {
					out = append(out, buf[start:i]...)
					out = append(out, p.placeholder...)
					i += len(p.value)
					start = i
					continue scan
				}
			} else if !final && bytes.HasPrefix(p.value, tail) {
				// A longer value may begin here: hold back from i.
				break scan
			}
		}
		i++
	}
	out = append(out, buf[start:i]...)
	*s.held = append(buf[:0], buf[i:]...)
	*s.out = out[:0]
	if len(out) == 0 {
		return nil
	}
	if _, err := r.w.Write(out); err != nil {
		r.err = err
		return err
	}
	return nil
}
