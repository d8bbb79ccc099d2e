package control

import (
	"reflect"
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

// TestWireRoundTrip: every field of a message, its description included,
// comes back as it went.
func TestWireRoundTrip(t *testing.T) {
	var m Message
	n := 0
	fill(reflect.ValueOf(&m).Elem(), &n)
	m.Signal = 9 // the decoder bounds these
	m.Spawn.Pdeathsig, m.Spawn.AmbientCaps = 9, []uint64{21, 38}
	got, err := decode(encode(m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *got.Config, *m.Config)
	}
	// A nil second program stays nil; an empty list may come back nil.
	m = Message{Kind: KindConfig, Config: &config.Init{}}
	m.Config.Seccomp.Allowlist = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if got, err := decode(encode(m)); err != nil || got.Config.Seccomp.Denials != nil {
		t.Errorf("nil denials: %v %v", err, got.Config)
	}
}

// TestWireRejectsDamage: every truncation, and bytes past the end, are
// errors, never a panic or a half-filled message taken as whole.
func TestWireRejectsDamage(t *testing.T) {
	var m Message
	n := 0
	fill(reflect.ValueOf(&m).Elem(), &n)
	m.Signal = 9
	m.Spawn.Pdeathsig, m.Spawn.AmbientCaps = 9, []uint64{21, 38}
	body := encode(m)
	for i := 0; i < len(body); i++ {
		if _, err := decode(body[:i]); err == nil {
			t.Fatalf("a message cut at %d of %d bytes decoded", i, len(body))
		}
	}
	if _, err := decode(append(body, 0)); err == nil {
		t.Error("trailing bytes accepted")
	}
	huge := encode(Message{Kind: KindExit})
	huge = append(huge[:1], 0xff, 0xff, 0xff, 0xff, 0x0f) // a length of 4 GiB
	if _, err := decode(huge); err == nil {
		t.Error("a length past the end accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(Message{Kind: KindConfig, Config: &config.Init{Hostname: "h"}}))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decode(body)
		if err == nil {
			if _, err := decode(encode(m)); err != nil {
				t.Errorf("re-encoding a decoded message fails: %v", err)
			}
		}
	})
}
