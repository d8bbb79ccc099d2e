package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/asuser"
)

// helperEnv makes a run of this test binary a writer process:
// PATH:MAXSIZE:ID:COUNT.
const helperEnv = "JAIL_AUDIT_WRITER"

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
	maxSize, _ := strconv.ParseInt(f[1], 10, 64)
	count, _ := strconv.Atoi(f[3])
	l, err := OpenBounded(f[0], maxSize)
	if err != nil {
		return err
	}
	defer l.Close()
	for i := range count {
		if err := l.Write(execEvent(f[2], i)); err != nil {
			return err
		}
	}
	return nil
}

// execEvent is writer id's event seq: an exec whose command is long (a
// few KiB, more than a pipe writes atomically) and made of id's letter.
func execEvent(id string, seq int) Event {
	return Event{
		Event:    Exec,
		Sandbox:  "box-" + id,
		Labels:   map[string]string{"writer": id},
		UID:      1000,
		Command:  []string{"/bin/echo", strconv.Itoa(seq), strings.Repeat(id, 5000)},
		ExitCode: seq % 3,
		Duration: time.Duration(seq) * time.Millisecond,
	}
}

// decoded is a line read back.
type decoded struct {
	Time            string            `json:"time"`
	Event           string            `json:"event"`
	Reason          string            `json:"reason"`
	Sandbox         string            `json:"sandbox"`
	Labels          map[string]string `json:"labels"`
	UID             int               `json:"uid"`
	Command         []string          `json:"command"`
	User            string            `json:"user"`
	ExitCode        *int              `json:"exit_code"`
	Signal          int               `json:"signal"`
	DurationMS      *int64            `json:"duration_ms"`
	CPUMS           *int64            `json:"cpu_ms"`
	PeakMemoryBytes *int64            `json:"peak_memory_bytes"`
	Error           string            `json:"error"`
	Truncated       bool              `json:"truncated"`
}

// readLines parses every line of the files; a line that is not one whole
// JSON object, with no field unknown, fails the test.
func readLines(t *testing.T, paths ...string) []decoded {
	t.Helper()
	var out []decoded
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Fatalf("%s ends in a broken line", p)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 2*MaxLine)
		for sc.Scan() {
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.DisallowUnknownFields()
			var d decoded
			if err := dec.Decode(&d); err != nil || dec.More() {
				t.Fatalf("%s: a broken line (%v): %.100q", p, err, sc.Text())
			}
			out = append(out, d)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDefaultPath: root's log is under /var/log; a user's under
// XDG_STATE_HOME when it is absolute, or under HOME.
func TestDefaultPath(t *testing.T) {
	for _, c := range []struct {
		uid         int
		state, home string
		want        string
	}{
		{0, "/s", "/root", "/var/log/jail/audit.log"},
		{1000, "/s", "/home/u", "/s/jail/audit.log"},
		{1000, "", "/home/u", "/home/u/.local/state/jail/audit.log"},
		{1000, "relative", "/home/u", "/home/u/.local/state/jail/audit.log"},
		{1000, "", "", ""},
		{1000, "", "relative", ""},
	} {
		env := map[string]string{"XDG_STATE_HOME": c.state, "HOME": c.home}
		if got := DefaultPath(c.uid, func(k string) string { return env[k] }); got != c.want {
			t.Errorf("DefaultPath(%d, %q, %q) = %q, want %q", c.uid, c.state, c.home, got, c.want)
		}
	}
}

// TestOpenMakesAPrivateLog: the directories missing are made 0700, the
// log 0600; "-" is no log, and a nil Log writes nothing.
func TestOpenMakesAPrivateLog(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "state", "jail", "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Write(Event{Event: Create, Sandbox: "a"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Join(base, "state"):         os.ModeDir | 0o700,
		filepath.Join(base, "state", "jail"): os.ModeDir | 0o700,
		path:                                 0o600,
	} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}

	none, err := Open("-")
	if err != nil || none != nil {
		t.Fatalf(`Open("-"): %v, %v`, none, err)
	}
	if err := none.Write(Event{Event: Create}); err != nil {
		t.Errorf("nil Log: %v", err)
	}
	if err := none.Close(); err != nil {
		t.Errorf("nil Log: %v", err)
	}
	for _, bad := range []string{"", "relative/audit.log"} {
		if l, err := Open(bad); err == nil {
			l.Close()
			t.Errorf("Open(%q) accepted", bad)
		}
	}
}

// TestOpenRefusesADirectoryOthersControl: a log directory reached through
// a symbolic link (the directory itself, or one above), one its group or
// others may write, one above that others may write (not sticky), or one
// of another user is refused, and no log is made.
func TestOpenRefusesADirectoryOthersControl(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(base string) (path string, err error)
		want  string
	}{
		{"the directory a symbolic link", func(base string) (string, error) {
			if err := os.Mkdir(filepath.Join(base, "real"), 0o700); err != nil {
				return "", err
			}
			return filepath.Join(base, "jail", "audit.log"), os.Symlink("real", filepath.Join(base, "jail"))
		}, "symbolic link"},
		{"a directory above a symbolic link", func(base string) (string, error) {
			if err := os.Mkdir(filepath.Join(base, "real"), 0o700); err != nil {
				return "", err
			}
			return filepath.Join(base, "link", "jail", "audit.log"), os.Symlink("real", filepath.Join(base, "link"))
		}, "symbolic link"},
		{"the directory writable by its group", func(base string) (string, error) {
			dir := filepath.Join(base, "jail")
			if err := os.Mkdir(dir, 0o700); err != nil {
				return "", err
			}
			return filepath.Join(dir, "audit.log"), os.Chmod(dir, 0o770)
		}, "writable by group or others"},
		{"the directory writable by all, sticky", func(base string) (string, error) {
			dir := filepath.Join(base, "jail")
			if err := os.Mkdir(dir, 0o700); err != nil {
				return "", err
			}
			return filepath.Join(dir, "audit.log"), os.Chmod(dir, 0o1777)
		}, "writable by group or others"},
		{"a directory above writable by others", func(base string) (string, error) {
			dir := filepath.Join(base, "open")
			if err := os.Mkdir(dir, 0o700); err != nil {
				return "", err
			}
			return filepath.Join(dir, "jail", "audit.log"), os.Chmod(dir, 0o777)
		}, "writable by group or others"},
		{"the log a symbolic link", func(base string) (string, error) {
			if err := os.WriteFile(filepath.Join(base, "target"), nil, 0o600); err != nil {
				return "", err
			}
			return filepath.Join(base, "audit.log"), os.Symlink("target", filepath.Join(base, "audit.log"))
		}, "symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			path, err := c.setup(base)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Open(path)
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "audit log: ") {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
				if err == nil && info.Mode().IsRegular() && info.Size() > 0 {
					t.Errorf("%s written", p)
				}
				return nil
			})
		})
	}

	if os.Getuid() == 0 {
		// A directory of another user, as root.
		base := t.TempDir()
		dir := filepath.Join(base, "jail")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if l, err := Open(filepath.Join(dir, "audit.log")); err == nil {
			l.Close()
			t.Error("a directory of uid 65534 was accepted for root")
		}
	}
}

// TestNoEnvironmentCanBeLogged: neither an Event nor its line has a field
// an environment could go in, and a line written has only the documented
// keys. An exec's environment is not the audit log's to know.
func TestNoEnvironmentCanBeLogged(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Event](), reflect.TypeFor[line]()} {
		for f := range typ.Fields() {
			name := strings.ToLower(f.Name + " " + f.Tag.Get("json"))
			if strings.Contains(name, "env") {
				t.Errorf("%s.%s: a field for an environment", typ.Name(), f.Name)
			}
		}
	}
	full := Event{
		Time: time.Unix(1, 0), Event: Exec, Reason: "idle", Sandbox: "s",
		Labels: map[string]string{"k": "v"}, UID: 1, Command: []string{"env"}, User: "u",
		ExitCode: 1, Signal: 9, Duration: time.Second, CPU: time.Second, PeakMemory: 1, Error: "jail: x",
	}
	b, err := Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"command", "cpu_ms", "duration_ms", "error", "event", "exit_code", "labels",
		"peak_memory_bytes", "reason", "sandbox", "signal", "time", "uid", "user"}
	if !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
}

// TestMarshal: a line is one JSON object ended by a newline, time in UTC
// RFC 3339 with nanoseconds; an exec always says its exit code and
// numbers, other events only those that are set; a newline in a value
// does not end the line.
func TestMarshal(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	for _, c := range []struct {
		name string
		e    Event
		want string
	}{
		{"an exec that exited 0", Event{Time: at, Event: Exec, Sandbox: "a", UID: 1000, Command: []string{"true"}},
			`{"time":"2025-01-02T02:04:05.000000006Z","event":"exec","sandbox":"a","uid":1000,"command":["true"],"exit_code":0,"duration_ms":0,"cpu_ms":0,"peak_memory_bytes":0}`},
		{"an exec killed", Event{Time: at, Event: Exec, Sandbox: "a", UID: 0, Command: []string{"sleep", "9"}, User: "nobody",
			ExitCode: 137, Signal: 9, Duration: 1500 * time.Millisecond, CPU: 3 * time.Millisecond, PeakMemory: 4096},
			`{"time":"2025-01-02T02:04:05.000000006Z","event":"exec","sandbox":"a","uid":0,"command":["sleep","9"],"user":"nobody","exit_code":137,"signal":9,"duration_ms":1500,"cpu_ms":3,"peak_memory_bytes":4096}`},
		{"a create with labels", Event{Time: at, Event: Create, Sandbox: "a", UID: 1000, Labels: map[string]string{"b": "2", "a": "<1>"}},
			`{"time":"2025-01-02T02:04:05.000000006Z","event":"create","sandbox":"a","labels":{"a":"<1>","b":"2"},"uid":1000}`},
		{"a removal for idleness", Event{Time: at, Event: Remove, Reason: "idle", Sandbox: "a", UID: 1000},
			`{"time":"2025-01-02T02:04:05.000000006Z","event":"rm","reason":"idle","sandbox":"a","uid":1000}`},
		{"a failed stop", Event{Time: at, Event: Stop, Sandbox: "a", UID: 1000, Error: "jail: a\nb"},
			`{"time":"2025-01-02T02:04:05.000000006Z","event":"stop","sandbox":"a","uid":1000,"error":"jail: a\nb"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Marshal(c.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want+"\n" {
				t.Errorf("got  %s\nwant %s", b, c.want)
			}
		})
	}
	b, err := Marshal(Event{Event: Start})
	if err != nil {
		t.Fatal(err)
	}
	var d decoded
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if ts, err := time.Parse(time.RFC3339Nano, d.Time); err != nil || time.Since(ts) > time.Hour || !strings.HasSuffix(d.Time, "Z") {
		t.Errorf("a zero time is written as %q, not now in UTC", d.Time)
	}
}

// TestLinesAreBounded: a line never passes MaxLine; a command too long for
// it is cut (whole arguments first, then the last one, never mid
// character), as are an error and labels too long, and the line says
// "truncated" (labels too long are left out whole). Characters JSON writes longer (control characters, invalid
// UTF-8) count at their written size.
func TestLinesAreBounded(t *testing.T) {
	big := strings.Repeat("x", MaxLine)
	for _, c := range []struct {
		name       string
		e          Event
		truncated  bool
		wantLabels bool
	}{
		{"a short command", Event{Event: Exec, Command: []string{"echo", "hi"}}, false, false},
		{"one argument too long", Event{Event: Exec, Command: []string{"echo", big}}, true, false},
		{"many arguments", Event{Event: Exec, Command: slices.Repeat([]string{"0123456789"}, MaxLine/8)}, true, false},
		{"control characters", Event{Event: Exec, Command: []string{strings.Repeat("\x01", MaxLine/2)}}, true, false},
		{"invalid UTF-8", Event{Event: Exec, Command: []string{strings.Repeat("\xff", MaxLine/2)}}, true, false},
		{"multi-byte characters", Event{Event: Exec, Command: []string{strings.Repeat("é€", MaxLine/3)}}, true, false},
		{"a long error", Event{Event: Stop, Error: big}, true, false},
		{"long labels", Event{Event: Create, Labels: map[string]string{"k": big}}, true, false},
		{"small labels, a long command", Event{Event: Exec, Labels: map[string]string{"k": "v"}, Command: []string{big}}, true, true},
		{"everything long", Event{Event: Exec, Labels: map[string]string{"k": big}, Error: big, Command: []string{big, big}}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Marshal(c.e)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxLine || bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
				t.Fatalf("a line of %d bytes, %d newlines", len(b), bytes.Count(b, []byte("\n")))
			}
			var d decoded
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if d.Truncated != c.truncated {
				t.Errorf("truncated %v, want %v", d.Truncated, c.truncated)
			}
			if c.wantLabels && d.Labels["k"] != "v" {
				t.Errorf("labels lost: %v", d.Labels)
			}
			if c.truncated && len(c.e.Command) > 0 && len(b) < MaxLine/2 {
				t.Errorf("a command cut to a line of %d bytes, far below the bound", len(b))
			}
			// What is kept of the command is a prefix of it.
			for i, a := range d.Command {
				// As JSON writes it: a byte of invalid UTF-8 as U+FFFD.
				orig := strings.Map(func(r rune) rune { return r }, c.e.Command[i])
				if i < len(d.Command)-1 && a != orig || !strings.HasPrefix(orig, a) {
					t.Errorf("argument %d: %.40q is not a prefix of the original", i, a)
				}
			}
			if !c.truncated && !slices.Equal(d.Command, c.e.Command) {
				t.Errorf("command %q, want %q", d.Command, c.e.Command)
			}
		})
	}
}

// TestConcurrentWritersNeverMixLines: writers in several processes and in
// goroutines of this one write exec lines of a few KiB at once; every line
// is whole, and with no rotation none is lost; with rotations the files
// stay within the bound.
func TestConcurrentWritersNeverMixLines(t *testing.T) {
	const perWriter = 200
	for _, c := range []struct {
		name    string
		maxSize int64
	}{
		{"without rotation", DefaultMaxSize},
		{"with rotations", 64 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jail", "audit.log")
			shared, err := OpenBounded(path, c.maxSize)
			if err != nil {
				t.Fatal(err)
			}
			defer shared.Close()
			writers := []string{"a", "b", "c", "d"}
			var wg sync.WaitGroup
			errs := make(chan error, len(writers))
			for i, id := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i%2 == 0 {
						cmd := exec.Command(os.Args[0])
						cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s:%d", helperEnv, path, c.maxSize, id, perWriter))
						if out, err := cmd.CombinedOutput(); err != nil {
							errs <- fmt.Errorf("writer %s: %v: %s", id, err, out)
						}
						return
					}
					for n := range perWriter {
						if err := shared.Write(execEvent(id, n)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			lines := readLines(t, path+".1", path)
			count := map[string]int{}
			for _, d := range lines {
				id := d.Labels["writer"]
				want := execEvent(id, 0).Command[2]
				if d.Sandbox != "box-"+id || len(d.Command) != 3 || d.Command[2] != want {
					t.Fatalf("a line mixed from several writers: %.100v", d)
				}
				count[id]++
			}
			for _, p := range []string{path, path + ".1"} {
				if st, err := os.Stat(p); err == nil && st.Size() > c.maxSize {
					t.Errorf("%s: %d bytes, past %d", p, st.Size(), c.maxSize)
				}
			}
			if c.maxSize == DefaultMaxSize {
				for _, id := range writers {
					if count[id] != perWriter {
						t.Errorf("writer %s: %d lines, want %d", id, count[id], perWriter)
					}
				}
			} else if _, err := os.Stat(path + ".1"); err != nil {
				t.Errorf("never rotated: %v", err)
			}
		})
	}
}

// TestAsUnprivilegedUser runs this package's tests again as the
// unprivileged user jail-test, when run as root.
func TestAsUnprivilegedUser(t *testing.T) {
	asuser.RerunAll(t, "^TestAsUnprivilegedUser$")
}
