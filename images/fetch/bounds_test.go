package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jail-sandbox/jail/images"
)

// rawHeader is one ustar header block, checksummed.
func rawHeader(name string, typ byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], "14510130000\x00")
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	copy(b[148:], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad512(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

// sparseTar is a tar of one PAX (GNU 1.0) sparse file of realsize bytes
// holding 5 bytes of data.
func sparseTar(name string, realsize int64) []byte {
	var records []byte
	for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}, {"GNU.sparse.name", name}, {"GNU.sparse.realsize", strconv.FormatInt(realsize, 10)}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + 1
		for len(strconv.Itoa(n))+len(rec) != n {
			n++
		}
		records = append(records, strconv.Itoa(n)+rec...)
	}
	sparseMap, data := pad512([]byte("1\n0\n5\n")), pad512([]byte("hello"))
	var out []byte
	out = append(out, rawHeader("PaxHeaders/"+name, 'x', int64(len(records)))...)
	out = append(out, pad512(records)...)
	out = append(out, rawHeader("GNUSparseFile.0/"+name, '0', int64(len(sparseMap)+5))...)
	out = append(out, sparseMap...)
	out = append(out, data...)
	return append(out, make([]byte, 1024)...)
}

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
		_, err = unpackLayer(bytes.NewReader(sparseTar("big", c.realsize)), root, images.Ownership{}, m)
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
