package sandboxlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/asuser"
)

// helperEnv makes a run of this test binary an exec's client writing its
// output: DIR:BOUND:ID:LINES.
const helperEnv = "JAIL_SANDBOXLOG_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		if err := writerProcess(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writerProcess(spec string) error {
	f := strings.Split(spec, ":")
	if len(f) != 4 {
		return fmt.Errorf("bad spec %q", spec)
	}
	bound, _ := strconv.ParseInt(f[1], 10, 64)
	lines, _ := strconv.Atoi(f[3])
	dir, err := openDirPath(f[0])
	if err != nil {
		return err
	}
	defer dir.Close()
	l, err := Open(dir, bound)
	if err != nil {
		return err
	}
	defer l.Close()
	return writeStream(l, f[2], lines)
}

// openDirPath opens a directory O_PATH, as package sandboxdir holds a
// sandbox's.
func openDirPath(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openDir(t *testing.T, path string) *os.File {
	t.Helper()
	d, err := openDirPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// streamLine is line n of stream id: "id n " and id's letter, 10 to 300
// bytes long with its newline.
func streamLine(id string, n int) string {
	head := fmt.Sprintf("%s %d ", id, n)
	return head + strings.Repeat(id[:1], 10+n*37%290) + "\n"
}

// writeStream writes stream id's lines through a LineWriter in pieces cut
// at random places, as a pipe hands output over.
func writeStream(l *Log, id string, lines int) error {
	var all strings.Builder
	for n := range lines {
		all.WriteString(streamLine(id, n))
	}
	w := l.Line()
	rest := []byte(all.String())
	for len(rest) > 0 {
		n := min(len(rest), 1+rand.IntN(700))
		if _, err := w.Write(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return w.Close()
}

// TestLineWriterWritesWholeLines: what a stream writes reaches the log as
// whole lines, however the writes cut it; a line longer than
// MaxLinePending goes in pieces of that size, and an unfinished last line
// goes at Close, each ended by a newline.
func TestLineWriterWritesWholeLines(t *testing.T) {
	long := strings.Repeat("x", MaxLinePending)
	for _, c := range []struct {
		name   string
		writes []string
		before string // in the log before Close
		after  string
	}{
		{"nothing", nil, "", ""},
		{"one line", []string{"a\n"}, "a\n", "a\n"},
		{"a line in pieces", []string{"a", "b", "c\n"}, "abc\n", "abc\n"},
		{"lines and a start", []string{"a\nb\nc"}, "a\nb\n", "a\nb\nc\n"},
		{"a start finished later", []string{"a", "b\nc", "d\n"}, "ab\ncd\n", "ab\ncd\n"},
		{"an unfinished last line", []string{"a\n", "b"}, "a\n", "a\nb\n"},
		{"a line of the longest held", []string{long[:10], long[10:], "\n"}, long + "\n", long + "\n"},
		{"a line longer than held", []string{long, "yz", "\n"}, long + "\nyz\n", long + "\nyz\n"},
		{"a long line written whole", []string{long + "yz\n"}, long + "yz\n", long + "yz\n"},
		{"a long unfinished line", []string{long + "yz"}, long + "\n", long + "\nyz\n"},
		{"empty writes", []string{"", "a", "", "\n"}, "a\n", "a\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			dir := openDir(t, path)
			l, err := Open(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			w := l.Line()
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(path, "log")); string(got) != c.before {
				t.Errorf("before Close: %q, want %q", got, c.before)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(path, "log")); string(got) != c.after {
				t.Errorf("after Close: %q, want %q", got, c.after)
			}
			if _, err := w.Write([]byte("x")); err == nil {
				t.Error("a write after Close was taken")
			}
		})
	}
}

// TestRotatesAtTheBound: the log is rotated to log.1 before a chunk that
// would take it past the bound, one old file kept, so the two hold at most
// twice the bound; a write longer than MaxChunk goes in chunks cut at
// newlines.
func TestRotatesAtTheBound(t *testing.T) {
	path := t.TempDir()
	dir := openDir(t, path)
	const bound = 1000
	l, err := Open(dir, bound)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var all []string
	for n := range 200 {
		s := streamLine("a", n)
		all = append(all, s)
		if _, err := l.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		old, _ := os.ReadFile(filepath.Join(path, "log.1"))
		cur, _ := os.ReadFile(filepath.Join(path, "log"))
		if len(old) > bound || len(cur) > bound {
			t.Fatalf("after line %d: log.1 %d bytes, log %d: past the bound %d", n, len(old), len(cur), bound)
		}
		// What is kept is the end of what was written, whole lines.
		kept := string(old) + string(cur)
		if !strings.HasSuffix(strings.Join(all, ""), kept) || !strings.HasPrefix(kept, "a ") {
			t.Fatalf("after line %d: kept %q", n, kept)
		}
	}

	// A write larger than a chunk: chunks end at newlines.
	big := strings.Repeat(strings.Repeat("b", 99)+"\n", MaxChunk/100*3)
	path2 := t.TempDir()
	l2, err := Open(openDir(t, path2), 2*MaxChunk)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if n, err := l2.Write([]byte(big)); n != len(big) || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	got, err := Tail(openDir(t, path2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.HasSuffix(big, string(got)) || got[0] != 'b' {
		t.Errorf("kept %d bytes, not whole lines of the end of the write", len(got))
	}
}

// TestTailAcrossTheTwoFiles: Tail gives the last n lines of log.1 and log
// together, all of them for n = 0, and nothing when there is no log.
func TestTailAcrossTheTwoFiles(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, cur *string
		n        int
		want     string
	}{
		{"no log", nil, nil, 3, ""},
		{"all of one file", nil, ptr("a\nb\n"), 0, "a\nb\n"},
		{"the last lines of log", ptr("a\nb\n"), ptr("c\nd\ne\n"), 2, "d\ne\n"},
		{"exactly log", ptr("a\nb\n"), ptr("c\nd\n"), 2, "c\nd\n"},
		{"into log.1", ptr("a\nb\n"), ptr("c\nd\n"), 3, "b\nc\nd\n"},
		{"more than kept", ptr("a\nb\n"), ptr("c\n"), 10, "a\nb\nc\n"},
		{"all of both", ptr("a\nb\n"), ptr("c\n"), 0, "a\nb\nc\n"},
		{"only log.1", ptr("a\nb\n"), nil, 1, "b\n"},
		{"an empty log", ptr("a\nb\n"), ptr(""), 1, "b\n"},
		{"an unfinished last line", ptr("a\n"), ptr("b\nc"), 2, "b\nc"},
		{"empty lines count", nil, ptr("a\n\n\n"), 2, "\n\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			for name, content := range map[string]*string{"log.1": c.old, "log": c.cur} {
				if content != nil {
					if err := os.WriteFile(filepath.Join(path, name), []byte(*content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := Tail(openDir(t, path), c.n)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("Tail(%d): %q, want %q", c.n, got, c.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestTailRefusesALinkedLog: Tail does not read a file a symbolic link in
// the sandbox's directory leads to, nor wait on a FIFO.
func TestTailRefusesALinkedLog(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(dir string) error
	}{
		{"log a symbolic link", func(dir string) error {
			return os.Symlink("/etc/passwd", filepath.Join(dir, "log"))
		}},
		{"log.1 a symbolic link", func(dir string) error {
			return os.Symlink("/etc/passwd", filepath.Join(dir, "log.1"))
		}},
		{"log a FIFO", func(dir string) error {
			return syscall.Mkfifo(filepath.Join(dir, "log"), 0o600)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			got, err := Tail(openDir(t, path), 0)
			if err == nil || len(got) > 0 {
				t.Errorf("Tail: %q, %v", got, err)
			}
		})
	}
}

// TestConcurrentExecsNeverMixLines: the streams of several execs, in
// goroutines of this process and in other processes, write through
// LineWriters at once, in pieces cut anywhere; every line in the log is
// one stream's whole line, each stream's kept lines are in order, and
// with rotations the two files stay within twice the bound (plus a
// chunk).
func TestConcurrentExecsNeverMixLines(t *testing.T) {
	const lines = 400
	for _, c := range []struct {
		name  string
		bound int64
	}{
		{"without rotation", DefaultBound},
		{"with rotations", 16 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			dir := openDir(t, path)
			l, err := Open(dir, c.bound)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			streams := []string{"a", "b", "c", "d", "e", "f"}
			var wg sync.WaitGroup
			errs := make(chan error, len(streams))
			for i, id := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i%2 == 0 {
						cmd := exec.Command(os.Args[0])
						cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s:%d", helperEnv, path, c.bound, id, lines))
						if out, err := cmd.CombinedOutput(); err != nil {
							errs <- fmt.Errorf("stream %s: %v: %s", id, err, out)
						}
						return
					}
					if err := writeStream(l, id, lines); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got, err := Tail(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			next := map[string]int{}
			for _, line := range strings.SplitAfter(string(got), "\n") {
				if line == "" {
					continue
				}
				id, rest, _ := strings.Cut(line, " ")
				num, _, _ := strings.Cut(rest, " ")
				n, err := strconv.Atoi(num)
				if err != nil || len(id) != 1 || line != streamLine(id, n) {
					t.Fatalf("a broken or mixed line: %.80q", line)
				}
				if seen, ok := next[id]; ok && n != seen {
					t.Fatalf("stream %s: line %d where %d was due", id, n, seen)
				}
				next[id] = n + 1
			}
			for _, id := range streams {
				if c.bound == DefaultBound && next[id] != lines {
					t.Errorf("stream %s: %d lines, want %d", id, next[id], lines)
				}
			}
			if c.bound != DefaultBound {
				if int64(len(got)) > 2*c.bound+MaxChunk {
					t.Errorf("%d bytes kept, past twice the bound %d", len(got), c.bound)
				}
				if _, err := os.Stat(filepath.Join(path, "log.1")); err != nil {
					t.Errorf("never rotated: %v", err)
				}
			}
			if !bytes.HasSuffix(got, []byte("\n")) && len(got) > 0 {
				t.Error("the log ends in a broken line")
			}
		})
	}
}

// TestAsUnprivilegedUser runs this package's tests again as the
// unprivileged user jail-test, when run as root.
func TestAsUnprivilegedUser(t *testing.T) {
	asuser.RerunAll(t, "^TestAsUnprivilegedUser$")
}
