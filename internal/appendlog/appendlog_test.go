package appendlog

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/internal/asuser"
)

// helperEnv makes a run of this test binary a writer process:
// DIR:NAME:BOUND:ID:COUNT:SIZE.
const helperEnv = "JAIL_APPENDLOG_WRITER"

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
	if len(f) != 6 {
		return fmt.Errorf("bad spec %q", spec)
	}
	bound, _ := strconv.ParseInt(f[2], 10, 64)
	count, _ := strconv.Atoi(f[4])
	size, _ := strconv.Atoi(f[5])
	dir, err := os.Open(f[0])
	if err != nil {
		return err
	}
	defer dir.Close()
	l, err := Open(dir, f[1], bound)
	if err != nil {
		return err
	}
	defer l.Close()
	for i := range count {
		if err := l.Append(testLine(f[3], i, size)); err != nil {
			return err
		}
	}
	return nil
}

// testLine is line seq of writer id: "id seq " then id's letter repeated,
// size bytes in all with its newline, so that a line broken or mixed with
// another writer's is told.
func testLine(id string, seq, size int) []byte {
	head := fmt.Sprintf("%s %d ", id, seq)
	return []byte(head + strings.Repeat(id[:1], max(size-len(head)-1, 0)) + "\n")
}

// checkLines checks that every line of data is whole and unmixed, and
// returns the sequence numbers of each writer in the order they appear.
func checkLines(t *testing.T, data []byte, size int) map[string][]int {
	t.Helper()
	seqs := map[string][]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.SplitN(line, " ", 3)
		seq, err := strconv.Atoi(fields[min(1, len(fields)-1)])
		if len(fields) != 3 || err != nil || len(line)+1 != size ||
			strings.Trim(fields[2], fields[0][:1]) != "" {
			t.Fatalf("a broken or mixed line: %.80q (%d bytes)", line, len(line))
		}
		seqs[fields[0]] = append(seqs[fields[0]], seq)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("the log ends in a broken line")
	}
	return seqs
}

func openDir(t *testing.T, path string) *os.File {
	t.Helper()
	d, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// TestRotatesBySize: an append that would take a non-empty log past its
// bound first renames it to NAME.1, replacing the old one; an append
// larger than the bound goes whole into an empty log.
func TestRotatesBySize(t *testing.T) {
	for _, c := range []struct {
		name     string
		bound    int64
		appends  []string
		cur, old string
	}{
		{"under the bound", 10, []string{"ab\n", "cd\n"}, "ab\ncd\n", ""},
		{"exactly the bound", 6, []string{"ab\n", "cd\n"}, "ab\ncd\n", ""},
		{"past the bound", 5, []string{"ab\n", "cd\n"}, "cd\n", "ab\n"},
		{"one old file kept", 3, []string{"a\n", "b\n", "c\n", "d\n"}, "d\n", "c\n"},
		{"an append larger than the bound", 2, []string{"abcd\n", "ef\n"}, "ef\n", "abcd\n"},
		{"a large first append", 2, []string{"abcdef\n"}, "abcdef\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			l, err := Open(openDir(t, path), "log", c.bound)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, a := range c.appends {
				if err := l.Append([]byte(a)); err != nil {
					t.Fatal(err)
				}
			}
			if got := string(read(t, filepath.Join(path, "log"))); got != c.cur {
				t.Errorf("log: %q, want %q", got, c.cur)
			}
			if got := string(read(t, filepath.Join(path, "log.1"))); got != c.old {
				t.Errorf("log.1: %q, want %q", got, c.old)
			}
			for _, f := range []string{"log", "log.1", "log.lock"} {
				if st, err := os.Stat(filepath.Join(path, f)); err == nil && st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", f, st.Mode())
				}
			}
		})
	}
}

// TestFollowsAnotherWritersRotation: a writer whose file another writer
// rotated away (or that was removed) appends to the new file, not to the
// old one.
func TestFollowsAnotherWritersRotation(t *testing.T) {
	path := t.TempDir()
	dir := openDir(t, path)
	a, err := Open(dir, "log", 6)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir, "log", 6)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, s := range []struct {
		w    *File
		line string
	}{{a, "a1\n"}, {b, "b1\n"}, {a, "a2\n"}, {b, "b2\n"}} {
		if err := s.w.Append([]byte(s.line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(read(t, filepath.Join(path, "log.1"))); got != "a1\nb1\n" {
		t.Errorf("log.1: %q", got)
	}
	if got := string(read(t, filepath.Join(path, "log"))); got != "a2\nb2\n" {
		t.Errorf("log: %q, want b's line in the new file", got)
	}
	if err := os.Remove(filepath.Join(path, "log")); err != nil {
		t.Fatal(err)
	}
	if err := b.Append([]byte("b3\n")); err != nil {
		t.Fatal(err)
	}
	if got := string(read(t, filepath.Join(path, "log"))); got != "b3\n" {
		t.Errorf("log after its removal: %q", got)
	}
}

// TestConcurrentWritersNeverBreakALine: writers in several goroutines
// (each with its own File, and sharing one) and in several processes
// append at once; with no rotation every line is there, whole; with
// rotations every kept line is whole, each file stays within the bound,
// and each writer's kept lines are an unbroken run ending at its last (no
// line went to a file already rotated away, which would leave a gap).
func TestConcurrentWritersNeverBreakALine(t *testing.T) {
	const (
		perWriter = 300
		size      = 3000 // more than a pipe's atomic write, less than a page
	)
	for _, c := range []struct {
		name  string
		bound int64
	}{
		{"without rotation", 1 << 30},
		{"with rotations", 40 * size},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			dir := openDir(t, path)
			shared, err := Open(dir, "log", c.bound)
			if err != nil {
				t.Fatal(err)
			}
			defer shared.Close()

			writers := []string{"a", "b", "c", "d", "e", "f"}
			var wg sync.WaitGroup
			errs := make(chan error, len(writers))
			for i, id := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch i % 3 {
					case 0: // a process of its own
						cmd := exec.Command(os.Args[0])
						cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:log:%d:%s:%d:%d", helperEnv, path, c.bound, id, perWriter, size))
						if out, err := cmd.CombinedOutput(); err != nil {
							errs <- fmt.Errorf("writer %s: %v: %s", id, err, out)
						}
					case 1: // a File of its own
						l, err := Open(dir, "log", c.bound)
						if err != nil {
							errs <- err
							return
						}
						defer l.Close()
						for n := range perWriter {
							if err := l.Append(testLine(id, n, size)); err != nil {
								errs <- err
								return
							}
						}
					case 2: // the shared File
						for n := range perWriter {
							if err := shared.Append(testLine(id, n, size)); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}

			old, cur := read(t, filepath.Join(path, "log.1")), read(t, filepath.Join(path, "log"))
			for name, b := range map[string][]byte{"log": cur, "log.1": old} {
				if int64(len(b)) > c.bound {
					t.Errorf("%s: %d bytes, past the bound %d", name, len(b), c.bound)
				}
			}
			seqs := checkLines(t, append(old, cur...), size)
			if len(seqs) == 0 {
				t.Fatal("no line kept")
			}
			for _, id := range writers {
				// A writer that finished early may have all its lines
				// rotated away; one that has any kept has its last.
				s := seqs[id]
				if len(s) > 0 && s[len(s)-1] != perWriter-1 {
					t.Fatalf("writer %s: its last line is missing (%d kept, the last %d)", id, len(s), s[len(s)-1])
				}
				for i := 1; i < len(s); i++ {
					if s[i] != s[i-1]+1 {
						t.Fatalf("writer %s: line %d follows line %d", id, s[i], s[i-1])
					}
				}
				if c.bound > perWriter*size*int64(len(writers)) && len(s) != perWriter {
					t.Errorf("writer %s: %d lines, want %d", id, len(s), perWriter)
				}
			}
		})
	}
}

// TestRefusesWhatIsNotItsFile: a log, rotated log or lock file that is a
// symbolic link, a FIFO (which must not block the open) or a file others
// may write is refused, and nothing is written through it.
func TestRefusesWhatIsNotItsFile(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(dir string) error
		want  string
	}{
		{"the log a symbolic link", func(dir string) error {
			return os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "log"))
		}, "symbolic link"},
		{"the lock a symbolic link", func(dir string) error {
			return os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "log.lock"))
		}, "symbolic link"},
		{"the log a FIFO", func(dir string) error {
			return syscall.Mkfifo(filepath.Join(dir, "log"), 0o600)
		}, ""},
		{"the log writable by its group", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "log"), nil, 0o600); err != nil {
				return err
			}
			return os.Chmod(filepath.Join(dir, "log"), 0o620)
		}, "writable by group"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := t.TempDir()
			if err := os.WriteFile(filepath.Join(path, "target"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			l, err := Open(openDir(t, path), "log", 100)
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if b := read(t, filepath.Join(path, "target")); len(b) != 0 {
				t.Errorf("written through a link: %q", b)
			}
		})
	}

	// A log replaced by a link after it was opened is refused at the
	// next append, not followed.
	path := t.TempDir()
	l, err := Open(openDir(t, path), "log", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.WriteFile(filepath.Join(path, "target"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(path, "log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(path, "target"), filepath.Join(path, "log")); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte("x\n")); err == nil {
		t.Error("an append followed a link planted in place of the log")
	}
	if b := read(t, filepath.Join(path, "target")); len(b) != 0 {
		t.Errorf("written through a link: %q", b)
	}
}

// TestOpenKept: the kept files are opened together; missing ones are nil.
func TestOpenKept(t *testing.T) {
	path := t.TempDir()
	dir := openDir(t, path)
	old, cur, err := OpenKept(dir, "log")
	if err != nil || old != nil || cur != nil {
		t.Fatalf("no log: %v %v %v", old, cur, err)
	}
	l, err := Open(dir, "log", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, s := range []string{"a\n", "b\n"} {
		if err := l.Append([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	old, cur, err = OpenKept(dir, "log")
	if err != nil || old == nil || cur == nil {
		t.Fatalf("OpenKept: %v %v %v", old, cur, err)
	}
	defer old.Close()
	defer cur.Close()
	var b [8]byte
	if n, _ := old.Read(b[:]); string(b[:n]) != "a\n" {
		t.Errorf("old: %q", b[:n])
	}
	if n, _ := cur.Read(b[:]); string(b[:n]) != "b\n" {
		t.Errorf("cur: %q", b[:n])
	}
}

// TestAsUnprivilegedUser runs this package's tests again as the
// unprivileged user jail-test, when run as root.
func TestAsUnprivilegedUser(t *testing.T) {
	runAsUnprivileged(t, "appendlog")
}

// runAsUnprivileged runs the test binary as jail-test with every test but
// TestAsUnprivilegedUser.
func runAsUnprivileged(t *testing.T, pkg string) {
	asuser.RerunAll(t, "^TestAsUnprivilegedUser$")
}
