package jail

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a size: a number of bytes, or with a binary suffix K, M or
// G (KiB, MiB, GiB). A trailing "B" or "iB" is accepted ("512MiB").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || t == "" {
		return 0, fmt.Errorf("%q is not a size (e.g. 512M, 2G, 1048576)", s)
	}
	bytes := v * float64(mult)
	if bytes > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(bytes), nil
}

// ParseNetLimits reads --net-limit's conns=N,bytes=SIZE,rate=SIZE (each
// optional; rate is bytes per second).
func ParseNetLimits(s string) (NetLimits, error) {
	var l NetLimits
	if s == "" {
		return l, nil
	}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return l, fmt.Errorf("%q: want conns=N, bytes=SIZE or rate=SIZE", item)
		}
		switch k {
		case "conns":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxNetConns {
				return l, fmt.Errorf("conns=%s: a number from 1 to %d", v, maxNetConns)
			}
			l.MaxConns = n
		case "bytes", "rate":
			n, err := ParseSize(v)
			if err != nil {
				return l, fmt.Errorf("%s=%s: %v", k, v, err)
			}
			if n < 1 {
				return l, fmt.Errorf("%s=%s: at least 1 byte", k, v)
			}
			if k == "bytes" {
				l.MaxBytes = n
			} else {
				l.Rate = n
			}
		default:
			return l, fmt.Errorf("%q: want conns=N, bytes=SIZE or rate=SIZE", item)
		}
	}
	return l, nil
}

// ParseMount reads SRC:DST[:ro|:rw]. Paths containing ':' are not supported.
func ParseMount(s string) (Mount, error) {
	parts := strings.Split(s, ":")
	var m Mount
	switch len(parts) {
	case 2:
	case 3:
		switch parts[2] {
		case "ro":
		case "rw":
			m.Writable = true
		default:
			return m, fmt.Errorf("%q: mode must be ro or rw", s)
		}
	default:
		return m, fmt.Errorf("%q is not SRC:DST[:ro|:rw]", s)
	}
	if parts[0] == "" || parts[1] == "" {
		return m, fmt.Errorf("%q is not SRC:DST[:ro|:rw]", s)
	}
	m.Source, m.Destination = parts[0], parts[1]
	return m, nil
}
