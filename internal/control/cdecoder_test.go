package control

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// seedDir, when set (make fuzz does), is where TestCDecoderAgreesWithGo
// writes the bodies of its cases: the C fuzzer's seed corpus.
var seedDir = flag.String("wire.seeds", "", "write the cases' bodies to this directory, as the C fuzzer's seeds")

// buildCDecoder compiles testdata/wire_print.c, the C init's generated
// decoder alone, with ASan and UBSan where the compiler has them.
func buildCDecoder(t *testing.T) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	out := filepath.Join(t.TempDir(), "wire_print")
	base := []string{"-Wall", "-Wextra", "-Werror", "-O1", "-g", "-o", out, "testdata/wire_print.c"}
	sanitized := append([]string{"-fsanitize=address,undefined", "-fno-sanitize-recover=all"}, base...)
	if msg, err := exec.Command(cc, sanitized...).CombinedOutput(); err != nil {
		t.Logf("%s with sanitizers: %v: %s; building without", cc, err, msg)
		if msg, err := exec.Command(cc, base...).CombinedOutput(); err != nil {
			t.Fatalf("building the C decoder: %v: %s", err, msg)
		}
	}
	return out
}

// cDecode runs the C decoder on bodies; each result is "error" or the
// canonical lines of the message it decoded.
func cDecode(t *testing.T, prog string, bodies [][]byte) []string {
	t.Helper()
	var in bytes.Buffer
	for _, b := range bodies {
		in.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(b))))
		in.Write(b)
	}
	cmd := exec.Command(prog)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the C decoder failed: %v\n%s", err, stderr.String())
	}
	var results []string
	var cur []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if line := sc.Text(); line == "end" {
			results = append(results, strings.Join(cur, "\n"))
			cur = nil
		} else {
			cur = append(cur, line)
		}
	}
	if len(results) != len(bodies) {
		t.Fatalf("the C decoder answered %d of %d bodies", len(results), len(bodies))
	}
	return results
}

// canonical prints m as the C decoder does: one line a value, keyed by its
// field's path, strings and bytes in hex. It walks the Go value by
// reflection, apart from the generator.
func canonical(m Message) string {
	lines := []string{"ok"}
	var walk func(key string, v reflect.Value)
	walk = func(key string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				lines = append(lines, key+"=nil")
			} else {
				walk(key, v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(key+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				if v.IsNil() {
					lines = append(lines, key+"=nil")
				} else {
					lines = append(lines, key+"=b:"+hex.EncodeToString(v.Bytes()))
				}
				return
			}
			lines = append(lines, fmt.Sprintf("%s.len=%d", key, v.Len()))
			for i := 0; i < v.Len(); i++ {
				walk(fmt.Sprintf("%s[%d]", key, i), v.Index(i))
			}
		case reflect.String:
			lines = append(lines, key+"=s:"+hex.EncodeToString([]byte(v.String())))
		case reflect.Bool:
			b := 0
			if v.Bool() {
				b = 1
			}
			lines = append(lines, fmt.Sprintf("%s=%d", key, b))
		case reflect.Int, reflect.Int64:
			lines = append(lines, key+"="+strconv.FormatInt(v.Int(), 10))
		case reflect.Uint16, reflect.Uint32, reflect.Uint64:
			lines = append(lines, key+"="+strconv.FormatUint(v.Uint(), 10))
		default:
			panic("canonical: add " + v.Kind().String())
		}
	}
	walk("m", reflect.ValueOf(m))
	return strings.Join(lines, "\n")
}

// wireCases are representative messages and their edges: the seeds of the
// C fuzzer too.
func wireCases() map[string]Message {
	program := func(n int) []byte { return bytes.Repeat([]byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}, n) }
	hostTree := &config.Init{
		Rootfs:   config.Rootfs{HostTree: true, Home: "/home/u"},
		Hostname: "jail",
		Process: config.Process{
			Args: []string{"sh", "-c", "echo hi"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=/home/u"},
			Cwd: "/workspace", UID: 1000, GID: 1000, SwitchUser: true,
		},
		Mounts: []config.Mount{
			{Source: "/srv/proj", SourceDev: 2049, SourceIno: 131073, SourceUID: 1000, SourceGID: 1000, SourceIsDir: true, Destination: "/workspace", Writable: true, FD: -1},
			{Source: "/etc/hosts", SourceDev: 2049, SourceIno: 12, SourceUID: -1, SourceGID: -1, Destination: "/etc/hosts", FD: 7},
		},
		Limits:       config.Limits{TmpSize: 64 << 20, RunSize: 16 << 20, ShmSize: 64 << 20, UpperSize: 1 << 30, HomeSize: 64 << 20},
		Masks:        []string{"/var/lib/jenkins"},
		ReadOnly:     []string{"/opt/ro"},
		Seccomp:      filter.Filter{Allowlist: program(3), Guard: program(1)},
		EnterCgroup:  true,
		Capabilities: 1<<21 | 1<<38,
	}
	image := &config.Init{
		Rootfs: config.Rootfs{
			Lowers:   []config.Layer{{Path: "/var/lib/jail/images/layers/a", Dev: math.MaxUint64, Ino: 1}, {Path: "/l/b", Dev: 0, Ino: math.MaxUint64}},
			ReadOnly: true,
		},
		Process:  config.Process{Args: []string{"/bin/true"}, TTY: true, Rows: math.MaxUint16, Cols: 80, UID: math.MaxUint32, GID: math.MaxUint32},
		Limits:   config.Limits{RlimitData: math.MaxInt64, RlimitNproc: 1, RlimitStack: math.MinInt64, SysVShm: -1},
		Seccomp:  filter.Filter{Allowlist: program(4096), Denials: []byte{}},
		TakeRoot: true, Capabilities: math.MaxUint64,
	}
	long := strings.Repeat("a/", 4096)
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("V%d=%s", i, strings.Repeat("x", i%17))
	}
	return map[string]Message{
		"empty":           {},
		"every field":     filled(),
		"host tree":       {Kind: KindConfig, Config: hostTree},
		"image, extremes": {Kind: KindConfig, Config: image},
		"release":         {Kind: KindRelease, Process: &config.Process{Args: []string{"./build.sh"}, Cwd: "/workspace", Env: many}},
		"long strings":    {Kind: KindConfig, Config: &config.Init{Hostname: long, Process: config.Process{Args: []string{long, "ünïcödé ☃", ""}, Cwd: long}}},
		"setup error":     {Kind: KindError, Step: "mount /workspace", Reason: "permission denied"},
		"exit":            {Kind: KindExit, Code: math.MinInt32, Signal: 128, Pid: math.MaxInt32, Running: math.MinInt64, Built: math.MaxInt64},
		"exit code max":   {Kind: KindExecError, Code: math.MaxInt32},
		"spawn": {Kind: KindSpawn, Spawn: &Spawn{
			Path: "/proc/self/exe", Args: []string{"jail:init"}, Stdin: true, Program: true, Cloneflags: math.MaxUint64,
			UIDMap: []IDMap{{0, 100000, 65536}, {0, math.MaxUint32, math.MaxUint32}}, GIDMap: []IDMap{{0, 0, 1}},
			AmbientCaps: []uint64{0, 63}, Pdeathsig: 64, Owner: -1, CgroupEnter: []string{"/sys/fs/cgroup/pids/x/tasks"},
		}},
	}
}

// TestCDecoderAgreesWithGo: what the Go encoder writes, the C init's
// decoder reads back field for field, for representative messages and
// their edges (every bound of every integer, empty and long strings and
// lists, nil and empty bytes).
func TestCDecoderAgreesWithGo(t *testing.T) {
	prog := buildCDecoder(t)
	cases := wireCases()
	var names []string
	var bodies [][]byte
	for name, m := range cases {
		names = append(names, name)
		bodies = append(bodies, mustEncode(t, m))
	}
	results := cDecode(t, prog, bodies)
	for i, name := range names {
		want := canonical(cases[name])
		if results[i] != want {
			t.Errorf("%s: the C decoder read\n%s\nwant\n%s", name, clip(results[i]), clip(want))
		}
		// The Go decoder reads the same (an empty list may come back nil).
		back, err := decode(bodies[i])
		if err != nil {
			t.Errorf("%s: the Go decoder: %v", name, err)
		} else if got := canonical(back); got != want {
			t.Errorf("%s: the Go decoder read\n%s\nwant\n%s", name, clip(got), clip(want))
		}
	}
	if *seedDir != "" {
		if err := os.MkdirAll(*seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range bodies {
			if err := os.WriteFile(filepath.Join(*seedDir, fmt.Sprintf("seed-%02d", i)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "..."
	}
	return s
}

// TestCDecoderRefusesWhatGoRefuses: damaged bodies are refused by both
// decoders alike: every truncation, a byte past the end, a NUL in a string,
// a bool of 2, integers past their bounds, a varint past 64 bits, a count
// past the end, another version; and for bodies with random bytes changed,
// the two decoders accept the same ones and read the same values.
func TestCDecoderRefusesWhatGoRefuses(t *testing.T) {
	prog := buildCDecoder(t)
	whole := mustEncode(t, filled())
	var bodies [][]byte
	for i := 0; i < len(whole); i++ {
		bodies = append(bodies, whole[:i])
	}
	v := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	uv := func(x uint64) []byte { return binary.AppendUvarint(nil, x) }
	sv := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	str := func(s string) []byte { return v(uv(uint64(len(s))), []byte(s)) }
	// A reply's head: version, kind, step, reason, code, signal, pid,
	// running, built, exec, then a persistent sandbox's cpu, max rss,
	// commands, others, stopped, active and total; then no config,
	// process, spawn or container, and no state.
	rest := v(sv(0), sv(0), sv(0), []byte{0, 0}, sv(0), sv(0))
	head := func(code, signal, pid int64) []byte {
		return v(uv(1), str("exit"), str(""), str(""), sv(code), sv(signal), sv(pid), sv(0), sv(0), uv(0), rest)
	}
	none := []byte{0, 0, 0, 0, 0}
	if _, err := decode(v(head(0, 0, 0), none)); err != nil {
		t.Fatalf("the hand-made reply is wrong: %v", err)
	}
	refused := map[string][]byte{
		"a byte past the end": v(head(0, 0, 0), none, []byte{0}),
		"a NUL in a string":   v(uv(1), str("ex\x00it"), str(""), str(""), sv(0), sv(0), sv(0), sv(0), sv(0), uv(0), rest, none),
		"a bool of 2":         v(head(0, 0, 0), []byte{2, 0, 0}),
		"others of 2": v(uv(1), str("status"), str(""), str(""), sv(0), sv(0), sv(0), sv(0), sv(0), uv(0),
			sv(0), sv(0), sv(0), []byte{2, 0}, sv(0), sv(0), none),
		"code past int32":       v(head(math.MaxInt32+1, 0, 0), none),
		"code below int32":      v(head(math.MinInt32-1, 0, 0), none),
		"signal 129":            v(head(0, 129, 0), none),
		"signal -1":             v(head(0, -1, 0), none),
		"pid -1":                v(head(0, 0, -1), none),
		"a varint of 11 bytes":  v(uv(1), str("exit"), str(""), str(""), bytes.Repeat([]byte{0x80}, 10), []byte{0}, sv(0), sv(0), sv(0), sv(0), uv(0), rest, none),
		"a varint past 64 bits": v(uv(1), str("exit"), str(""), str(""), bytes.Repeat([]byte{0xff}, 9), []byte{2}, sv(0), sv(0), sv(0), sv(0), uv(0), rest, none),
		"commands past its bound": v(uv(1), str("status"), str(""), str(""), sv(0), sv(0), sv(0), sv(0), sv(0), uv(0),
			sv(0), sv(0), sv(1048577), []byte{0, 0}, sv(0), sv(0), none),
		"a negative cpu": v(uv(1), str("exit"), str(""), str(""), sv(0), sv(0), sv(0), sv(0), sv(0), uv(0),
			sv(-1), sv(0), sv(0), []byte{0, 0}, sv(0), sv(0), none),
		"a length past the end": v(uv(1), uv(1<<40), []byte("exit")),
		"a count past the end":  v(head(0, 0, 0), []byte{0, 1}, uv(1<<20), none[:1]),
		"version 2":             v(uv(2), head(0, 0, 0)[1:], none),
		"version 0":             v(uv(0), head(0, 0, 0)[1:], none),
		"nothing":               {},
		"uid past uint32": v(head(0, 0, 0), []byte{0, 1}, uv(0), uv(0), str(""),
			uv(math.MaxUint32+1), uv(0), []byte{0, 0}, uv(0), uv(0), []byte{0}),
	}
	var names []string
	for name, b := range refused {
		if _, err := decode(b); err == nil {
			t.Errorf("%s: the Go decoder accepted it", name)
		}
		names = append(names, name)
		bodies = append(bodies, b)
	}
	results := cDecode(t, prog, bodies)
	for i := 0; i < len(whole); i++ {
		if results[i] != "error" {
			t.Fatalf("the C decoder accepted a body cut at %d of %d bytes", i, len(whole))
		}
	}
	for i, name := range names {
		if r := results[len(whole)+i]; r != "error" {
			t.Errorf("%s: the C decoder accepted it:\n%s", name, clip(r))
		}
	}

	// Random damage: both decoders agree on what they accept and read.
	rng := rand.New(rand.NewSource(23))
	var damaged [][]byte
	for _, m := range wireCases() {
		body := mustEncode(t, m)
		if len(body) > 1<<12 {
			continue
		}
		for i := 0; i < 40; i++ {
			d := append([]byte{}, body...)
			for j := 0; j <= rng.Intn(3); j++ {
				d[rng.Intn(len(d))] = byte(rng.Intn(256))
			}
			damaged = append(damaged, d)
		}
	}
	results = cDecode(t, prog, damaged)
	accepted := 0
	for i, d := range damaged {
		want := "error"
		if m, err := decode(d); err == nil {
			want = canonical(m)
			accepted++
		}
		if results[i] != want {
			t.Errorf("damaged body %x: the C decoder read\n%s\nthe Go decoder\n%s", d, clip(results[i]), clip(want))
		}
	}
	t.Logf("%d of %d damaged bodies decoded, alike", accepted, len(damaged))
}
