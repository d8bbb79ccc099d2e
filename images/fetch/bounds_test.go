package fetch

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/tartest"
)

// TestSparseEntryRefusedAtDefaultBounds: with no flag, a layer whose one
// sparse entry expands past the default layer bound is refused before a
// byte of it is written (SECURITY-LESSONS row 30; the integration test
// uses lowered bounds, so that the code before the fix could not fill the
// disk when it ran).
func TestSparseEntryRefusedAtDefaultBounds(t *testing.T) {
	for _, c := range []struct {
		realsize int64
		refused  bool
	}{
		{DefaultLimits.Layer + 1, true},
		{1 << 40, true},
		{1 << 20, false},
	} {
		dir := t.TempDir()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		m := &meter{lim: DefaultLimits, max: DefaultLimits.Layer}
		_, err = unpackLayer(bytes.NewReader(tartest.Sparse("big", c.realsize)), root, images.Ownership{}, m)
		root.Close()
		if c.refused {
			if !errors.Is(err, errTooBig) || m.err().Error() != "exceeds the bound of 16 GiB per layer (--max-layer-size raises it)" {
				t.Errorf("realsize %d: %v (%v); want it refused", c.realsize, err, m.err())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("realsize %d: refused, but wrote %v", c.realsize, entries)
			}
			continue
		}
		if err != nil || m.cost() < c.realsize {
			t.Errorf("realsize %d: %v, cost %d", c.realsize, err, m.cost())
		}
	}
}

// TestMeterSaysWhichBound: past the layer bound the layer is named, past
// what the image's bound leaves the image is.
func TestMeterSaysWhichBound(t *testing.T) {
	lim := Limits{Layer: 10 << 20, Image: 16 << 20}
	for _, c := range []struct {
		imageSoFar, write int64
		want              string
	}{
		{0, 11 << 20, "exceeds the bound of 10 MiB per layer (--max-layer-size raises it)"},
		{8 << 20, 9 << 20, "the image exceeds the bound of 16 MiB per image (--max-size raises it)"},
		{8 << 20, 8 << 20, ""},
		{0, -1, "the image exceeds the bound of 16 MiB per image (--max-size raises it)"},
	} {
		m := &meter{lim: lim, max: min(lim.Layer, lim.Image-c.imageSoFar)}
		err := m.write(c.write)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.want != "" && (err == nil || m.err().Error() != c.want):
			t.Errorf("%+v: %v, %v; want %q", c, err, m.err(), c.want)
		}
	}
}
