package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// valuesOf makes Values of name, value pairs, as Resolve would have
// (without its checks, so that any bytes can be a value).
func valuesOf(t testing.TB, pairs ...string) Values {
	t.Helper()
	v := Values{&valueSet{}}
	for i := 0; i < len(pairs); i += 2 {
		value := pairs[i+1]
		v.set.entries = append(v.set.entries, entry{pairs[i], &value})
	}
	return v
}

// reference is what the Redactor must write for in: the replacement of
// strings.NewReplacer given the non-empty values longest first (then by
// name), which at each position from the left replaces the first of them
// that occurs there.
func reference(v Values, in string) string {
	type pair struct{ name, value string }
	var pairs []pair
	for _, e := range v.list() {
		if *e.value != "" {
			pairs = append(pairs, pair{e.name, *e.value})
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int {
		if len(a.value) != len(b.value) {
			return len(b.value) - len(a.value)
		}
		return strings.Compare(a.name, b.name)
	})
	var oldnew []string
	for _, p := range pairs {
		oldnew = append(oldnew, p.value, "[secret:"+p.name+"]")
	}
	if len(oldnew) == 0 {
		return in
	}
	return strings.NewReplacer(oldnew...).Replace(in)
}

// redactChunked writes in to a Redactor in chunks of the given sizes (the
// last takes the rest), checks that it holds back fewer bytes than the
// longest value after each write, and returns what it wrote.
func redactChunked(t testing.TB, v Values, in string, sizes []int) string {
	t.Helper()
	var out bytes.Buffer
	r := NewRedactor(&out, v)
	longest := 0
	for _, e := range v.list() {
		longest = max(longest, len(*e.value))
	}
	rest := []byte(in)
	for _, n := range sizes {
		n = min(n, len(rest))
		if w, err := r.Write(rest[:n]); w != n || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		rest = rest[n:]
		if held := len(*r.s.held); held > max(longest-1, 0) {
			t.Fatalf("holds back %d bytes, the longest value is %d", held, longest)
		}
	}
	if _, err := r.Write(rest); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRedactorReplacesEveryOccurrence(t *testing.T) {
	cases := []struct {
		name  string
		pairs []string
		in    string
		want  string
	}{
		{"one value", []string{"TOKEN", "hunter2"}, "pw=hunter2 again hunter2\n", "pw=[secret:TOKEN] again [secret:TOKEN]\n"},
		{"short value still replaced", []string{"PIN", "42"}, "4242 1 42", "[secret:PIN][secret:PIN] 1 [secret:PIN]"},
		{"one-byte value", []string{"C", "x"}, "axbx", "a[secret:C]b[secret:C]"},
		{"empty value ignored", []string{"E", "", "T", "ab"}, "ab", "[secret:T]"},
		{"longest first where they overlap", []string{"SHORT", "abc", "LONG", "abcdef"}, "abcdef abc abcde", "[secret:LONG] [secret:SHORT] [secret:SHORT]de"},
		{"leftmost first", []string{"A", "abcd", "B", "cdef"}, "abcdef", "[secret:A]ef"},
		{"same value, first name", []string{"Z", "same", "A", "same"}, "same", "[secret:A]"},
		{"same value, first name when one is a prefix", []string{"AB", "same", "A", "same"}, "same", "[secret:A]"},
		{"self-overlapping value", []string{"T", "aaa"}, "aaaaaaa", "[secret:T][secret:T]a"},
		{"prefix held then dropped", []string{"T", "secret"}, "secre", "secre"},
		{"no values", nil, "plain", "plain"},
		{"binary value", []string{"B", "\x00\xff\n"}, "a\x00\xff\nb\x00", "a[secret:B]b\x00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := valuesOf(t, c.pairs...)
			for size := 1; size <= len(c.in)+1; size++ {
				var sizes []int
				for range len(c.in) {
					sizes = append(sizes, size)
				}
				if got := redactChunked(t, v, c.in, sizes); got != c.want {
					t.Fatalf("in chunks of %d: %q; want %q", size, got, c.want)
				}
			}
			if got := v.Redact(c.in); got != c.want {
				t.Errorf("Redact = %q; want %q", got, c.want)
			}
			if got := reference(v, c.in); got != c.want {
				t.Errorf("the reference says %q; the table is wrong", got)
			}
		})
	}
}

// TestRedactorMatchesReplacerForRandomChunkings is the property: for
// random values over a small alphabet (so that they overlap, repeat and
// share prefixes), random input with values planted in it, and random
// chunkings, what the Redactor writes is what the reference replacement
// of the whole input is.
func TestRedactorMatchesReplacerForRandomChunkings(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for iter := range 3000 {
		var pairs []string
		for i := range 1 + rng.IntN(4) {
			pairs = append(pairs, fmt.Sprintf("S%d", i), word(rng.IntN(7)))
		}
		v := valuesOf(t, pairs...)
		var in strings.Builder
		for range rng.IntN(12) {
			if rng.IntN(2) == 0 {
				in.WriteString(pairs[2*rng.IntN(len(pairs)/2)+1])
			} else {
				in.WriteString(word(rng.IntN(5)))
			}
		}
		var sizes []int
		for range rng.IntN(10) {
			sizes = append(sizes, rng.IntN(6))
		}
		want := reference(v, in.String())
		if got := redactChunked(t, v, in.String(), sizes); got != want {
			t.Fatalf("iteration %d: values %q, input %q, chunks %v:\n got %q\nwant %q", iter, pairs, in.String(), sizes, got, want)
		}
	}
}

// FuzzRedactor: the property above for inputs the fuzzer finds (go test
// -fuzz FuzzRedactor); its seeds run with the unit tests.
func FuzzRedactor(f *testing.F) {
	f.Add("abc", "abcabc", "ab", "xxabcabcab", uint64(3))
	f.Add("aaa", "aa", "a", "aaaaaaa", uint64(12345))
	f.Add("tok", "", "k", "tokentok", uint64(0))
	f.Fuzz(func(t *testing.T, v1, v2, v3, in string, chunking uint64) {
		v := valuesOf(t, "A", v1, "B", v2, "C", v3)
		var sizes []int
		for c := chunking; c != 0; c /= 7 {
			sizes = append(sizes, int(c%7))
		}
		if got, want := redactChunked(t, v, in, sizes), reference(v, in); got != want {
			t.Fatalf("got %q; want %q", got, want)
		}
	})
}

type failingWriter struct{ err error }

func (w failingWriter) Write(p []byte) (int, error) { return 0, w.err }

func TestRedactorReportsTheWritersErrorAndRefusesWritesAfterClose(t *testing.T) {
	boom := errors.New("boom")
	r := NewRedactor(failingWriter{boom}, valuesOf(t, "T", "secret"))
	if _, err := r.Write([]byte("plain")); !errors.Is(err, boom) {
		t.Errorf("Write = %v; want boom", err)
	}
	if _, err := r.Write([]byte("more")); !errors.Is(err, boom) {
		t.Errorf("Write after an error = %v; want boom again", err)
	}
	var out bytes.Buffer
	r = NewRedactor(&out, valuesOf(t, "T", "secret"))
	_, _ = r.Write([]byte("sec"))
	if err := r.Close(); err != nil || out.String() != "sec" {
		t.Errorf("Close = %v, wrote %q; want the held bytes", err, out.String())
	}
	if _, err := r.Write([]byte("x")); err == nil {
		t.Errorf("Write after Close succeeded")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestRedactorPrintsNoValue: printing a Redactor holding back part of a
// value, or a struct holding one, shows neither the value nor what is
// held.
func TestRedactorPrintsNoValue(t *testing.T) {
	r := NewRedactor(&bytes.Buffer{}, valuesOf(t, "TOKEN", theValue))
	_, _ = r.Write([]byte(theValue[:len(theValue)-1]))
	type holder struct {
		r  *Redactor
		rr Redactor
	}
	h := &holder{r: r}
	h.rr.s = r.s // as a copy would hold it
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		for _, x := range []any{r, h} {
			out := fmt.Sprintf(verb, x)
			for _, leak := range []string{theValue[:8], fmt.Sprintf("%x", theValue[:8]), fmt.Sprint([]byte(theValue[:4]))[1:12]} {
				if strings.Contains(out, leak) {
					t.Errorf("%s of %T shows %q: %s", verb, x, leak, out)
				}
			}
		}
	}
}

func BenchmarkRedactor(b *testing.B) {
	v := valuesOf(b, "A", "ghp_0123456789abcdefghij", "B", "hunter2")
	line := []byte(strings.Repeat("some ordinary output of a build, with numbers 12345 and hashes abcdef\n", 100))
	b.SetBytes(int64(len(line)))
	r := NewRedactor(discard{}, v)
	for b.Loop() {
		_, _ = r.Write(line)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
