package control

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/internal/config"
)

// fill sets every field reachable from v to a value that is not its zero
// value, so that a field the wire format forgets cannot round-trip.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	default:
		panic("fill: add " + v.Kind().String())
	}
}

// filled is a message with every field set, within the decoder's bounds.
func filled() Message {
	var m Message
	n := 0
	fill(reflect.ValueOf(&m).Elem(), &n)
	m.Signal = 9 // the decoder bounds these
	m.Spawn.Pdeathsig, m.Spawn.AmbientCaps = 9, []uint64{21, 38}
	for i := range m.Container.Process.Rlimits {
		m.Container.Process.Rlimits[i].Type = 7 + i
	}
	return m
}

func mustEncode(t testing.TB, m Message) []byte {
	t.Helper()
	body, err := encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestWireRoundTrip: every field of a message, its description included,
// comes back as it went.
func TestWireRoundTrip(t *testing.T) {
	m := filled()
	got, err := decode(mustEncode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *got.Config, *m.Config)
	}
	// A nil second program stays nil; an empty list may come back nil.
	m = Message{Kind: KindConfig, Config: &config.Init{}}
	m.Config.Seccomp.Allowlist = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if got, err := decode(mustEncode(t, m)); err != nil || got.Config.Seccomp.Denials != nil {
		t.Errorf("nil denials: %v %v", err, got.Config)
	}
}

// TestWireRejectsDamage: every truncation, and bytes past the end, are
// errors, never a panic or a half-filled message taken as whole.
func TestWireRejectsDamage(t *testing.T) {
	body := mustEncode(t, filled())
	for i := 0; i < len(body); i++ {
		if _, err := decode(body[:i]); err == nil {
			t.Fatalf("a message cut at %d of %d bytes decoded", i, len(body))
		}
	}
	if _, err := decode(append(body, 0)); err == nil {
		t.Error("trailing bytes accepted")
	}
	huge := mustEncode(t, Message{Kind: KindExit})
	huge = append(huge[:1], 0xff, 0xff, 0xff, 0xff, 0x0f) // a length of 4 GiB
	if _, err := decode(huge); err == nil {
		t.Error("a length past the end accepted")
	}
}

// TestWireRefusesNUL: a string with a NUL byte, which the C init could only
// cut short, is refused by the encoder, naming it, and by the decoder.
func TestWireRefusesNUL(t *testing.T) {
	m := Message{Kind: KindConfig, Config: &config.Init{Process: config.Process{Args: []string{"sh", "-c", "true\x00; rm -rf /"}}}}
	if _, err := encode(m); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("encoding a NUL byte: %v", err)
	}
	body := mustEncode(t, Message{Kind: "ab"})
	body[2] = 0 // the kind's first byte
	if _, err := decode(body); err == nil {
		t.Error("a NUL byte decoded")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(mustEncode(f, Message{Kind: KindConfig, Config: &config.Init{Hostname: "h"}}))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decode(body)
		if err == nil {
			again, err := encode(m)
			if err != nil {
				t.Fatalf("re-encoding a decoded message fails: %v", err)
			}
			if _, err := decode(again); err != nil {
				t.Errorf("decoding a re-encoded message fails: %v", err)
			}
		}
	})
}
