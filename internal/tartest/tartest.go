// Package tartest builds, for tests of image imports, tar archives that
// archive/tar does not write: a PAX (GNU 1.0) sparse entry, a few KiB that
// unpack to as many bytes as the entry says. It is imported by tests only.
package tartest

import (
	"fmt"
	"strconv"
)

// Sparse is a tar holding one PAX (GNU 1.0) sparse file, name, of realsize
// bytes with 5 bytes of data: a few KiB that expand to realsize.
func Sparse(name string, realsize int64) []byte {
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
	out = append(out, header("PaxHeaders/"+name, 'x', int64(len(records)))...)
	out = append(out, pad512(records)...)
	out = append(out, header("GNUSparseFile.0/"+name, '0', int64(len(sparseMap)+5))...)
	out = append(out, sparseMap...)
	out = append(out, data...)
	return append(out, make([]byte, 1024)...)
}

// header is one ustar header block, checksummed.
func header(name string, typ byte, size int64) []byte {
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

// pad512 pads b to whole blocks.
func pad512(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}
