package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// theValue is the secret of these tests: no error may hold it, nor a part
// of it long enough to matter.
const theValue = "s3cr3t-VALUE-9f8e7d"

func noValueIn(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	oneLine(t, err)
	for _, part := range []string{theValue, "s3cr3t", "9f8e7d"} {
		if strings.Contains(err.Error(), part) {
			t.Errorf("error holds (part of) the value: %q", err)
		}
	}
}

// storeWith makes a store holding defs, and a private file holding
// theValue and a newline, whose path is returned.
func storeWith(t *testing.T, defs ...Definition) (Store, string) {
	t.Helper()
	base := privateTemp(t)
	file := filepath.Join(base, "value")
	if err := os.WriteFile(file, []byte(theValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: filepath.Join(base, "jail"), UID: os.Geteuid()}
	for _, d := range defs {
		if d.File == "@" {
			d.File = file
		}
		if err := s.Add(d.Name, d.Source); err != nil {
			t.Fatal(err)
		}
	}
	return s, file
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestResolveReadsEachSource(t *testing.T) {
	s, _ := storeWith(t,
		Definition{"FROM_FILE", Source{File: "@"}},
		Definition{"FROM_ENV", Source{Env: "CALLER_VAR"}},
		Definition{"FROM_CMD", Source{Command: "printf '%s\\n\\n' " + theValue}},
		Definition{"OVERRIDDEN", Source{Env: "UNSET"}},
	)
	opts := Options{
		Store:    s,
		Getenv:   env(map[string]string{"CALLER_VAR": theValue + "-env"}),
		Override: env(map[string]string{"JAIL_SECRET_OVERRIDDEN": "over", "JAIL_SECRET_ONLY_OVERRIDE": "only"}),
	}
	v, err := Resolve([]string{"FROM_FILE", "FROM_ENV", "FROM_CMD", "OVERRIDDEN", "ONLY_OVERRIDE", "FROM_FILE"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"FROM_FILE=" + theValue,         // one trailing newline removed
		"FROM_ENV=" + theValue + "-env", //
		"FROM_CMD=" + theValue + "\n",   // only one of two
		"OVERRIDDEN=over",               // JAIL_SECRET_ first
		"ONLY_OVERRIDE=only",            // defined by the override alone
	}
	if got := v.Env(); !slices.Equal(got, want) {
		t.Errorf("Env = %q\nwant %q", got, want)
	}
	if got := v.Names(); !slices.Equal(got, []string{"FROM_FILE", "FROM_ENV", "FROM_CMD", "OVERRIDDEN", "ONLY_OVERRIDE"}) {
		t.Errorf("Names = %v", got)
	}

	// All overridden: the store is not read (here it does not exist).
	v, err = Resolve([]string{"X"}, Options{Store: Store{Dir: "/nonexistent/jail"}, Override: env(map[string]string{"JAIL_SECRET_X": "1"})})
	if err != nil || v.Len() != 1 {
		t.Errorf("override alone: %v, %v", v, err)
	}
	if v, err := Resolve(nil, Options{}); err != nil || v.Len() != 0 {
		t.Errorf("no names: %v, %v", v, err)
	}
}

// TestResolveRefusalsNameTheCauseNeverTheValue: every way a value can be
// refused gives one line naming the secret (and the file or variable),
// and none holds the value, even where the value was read (a command's
// stderr and stdout).
func TestResolveRefusalsNameTheCauseNeverTheValue(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir, file string) Source
		want    string
		timeout time.Duration
	}{
		{"unknown name", nil, "no such secret", 0},
		{"file readable by others", func(t *testing.T, dir, file string) Source {
			must(t, os.Chmod(file, 0o644))
			return Source{File: file}
		}, "its group or others have access", 0},
		{"file readable by the group", func(t *testing.T, dir, file string) Source {
			must(t, os.Chmod(file, 0o640))
			return Source{File: file}
		}, "its group or others have access", 0},
		{"file writable by others", func(t *testing.T, dir, file string) Source {
			must(t, os.Chmod(file, 0o602))
			return Source{File: file}
		}, "its group or others have access", 0},
		{"file replaced by a link to it", func(t *testing.T, dir, file string) Source {
			link := filepath.Join(dir, "link")
			must(t, os.Symlink(file, link))
			return Source{File: link}
		}, "a symbolic link", 0},
		{"file in a directory others can change", func(t *testing.T, dir, file string) Source {
			open := filepath.Join(dir, "open")
			must(t, os.Mkdir(open, 0o700))
			must(t, os.Chmod(open, 0o777))
			must(t, os.WriteFile(filepath.Join(open, "value"), []byte(theValue), 0o600))
			return Source{File: filepath.Join(open, "value")}
		}, "writable by group or others", 0},
		{"file replaced by a FIFO (not waited on)", func(t *testing.T, dir, file string) Source {
			fifo := filepath.Join(dir, "fifo")
			must(t, syscall.Mkfifo(fifo, 0o600))
			return Source{File: fifo}
		}, "not a regular file", 0},
		{"file replaced by a directory", func(t *testing.T, dir, file string) Source {
			sub := filepath.Join(dir, "sub")
			must(t, os.Mkdir(sub, 0o700))
			return Source{File: sub}
		}, "not a regular file", 0},
		{"file removed", func(t *testing.T, dir, file string) Source {
			must(t, os.Remove(file))
			return Source{File: file}
		}, "no such file", 0},
		{"file too large", func(t *testing.T, dir, file string) Source {
			must(t, os.WriteFile(file, []byte(strings.Repeat(theValue, MaxValueSize/len(theValue)+1)), 0o600))
			return Source{File: file}
		}, "larger than 65536 bytes", 0},
		{"file with a NUL byte", func(t *testing.T, dir, file string) Source {
			must(t, os.WriteFile(file, []byte(theValue+"\x00"+theValue), 0o600))
			return Source{File: file}
		}, "NUL byte", 0},
		{"variable unset", func(t *testing.T, dir, file string) Source {
			return Source{Env: "NOT_SET"}
		}, "$NOT_SET is not set", 0},
		{"command fails after printing the value", func(t *testing.T, dir, file string) Source {
			return Source{Command: "echo " + theValue + "; echo " + theValue + " >&2; exit 3"}
		}, "exit status 3", 0},
		{"command killed by a signal", func(t *testing.T, dir, file string) Source {
			return Source{Command: "echo " + theValue + "; kill -9 $$"}
		}, "signal: killed", 0},
		{"command not found", func(t *testing.T, dir, file string) Source {
			return Source{Command: "/nonexistent/" + theValue}
		}, "exit status 127", 0},
		{"command that does not finish", func(t *testing.T, dir, file string) Source {
			return Source{Command: "echo " + theValue + "; exec sleep 1000"}
		}, "did not finish within 50ms", 50 * time.Millisecond},
		{"command printing too much", func(t *testing.T, dir, file string) Source {
			return Source{Command: "yes " + theValue + " | head -c 70000"}
		}, "printed more than 65536 bytes", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, file := storeWith(t)
			if c.setup != nil {
				src := c.setup(t, filepath.Dir(file), file)
				if err := s.Add("THE_SECRET", src); err != nil {
					// Add refuses some already; Resolve must too, so
					// write the definition as a hand edit would.
					writeDefinitions(t, s, Definition{"THE_SECRET", src})
				}
			}
			_, err := Resolve([]string{"THE_SECRET"}, Options{Store: s, Getenv: env(nil), CommandTimeout: c.timeout})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "THE_SECRET") {
				t.Fatalf("Resolve = %v; want an error naming THE_SECRET: %s", err, c.want)
			}
			noValueIn(t, err)
			if c.name == "unknown name" && !errors.Is(err, ErrUnknown) {
				t.Errorf("%v does not wrap ErrUnknown", err)
			}
		})
	}
}

// TestResolveFileOfAnotherOwnerIsRefused: root's resolve of a private
// file that another user owns (who could change the value) is refused.
func TestResolveFileOfAnotherOwnerIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	s, file := storeWith(t, Definition{"THE_SECRET", Source{File: "@"}})
	must(t, os.Chown(file, 4242, 4242))
	_, err := Resolve([]string{"THE_SECRET"}, Options{Store: s})
	if err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
		t.Fatalf("Resolve = %v; want refused", err)
	}
	noValueIn(t, err)
}

func TestResolveRefusesInvalidNamesAndOverridesWithNUL(t *testing.T) {
	for _, c := range []struct {
		names    []string
		override map[string]string
		want     string
	}{
		{[]string{"A-B"}, nil, "not a valid name"},
		{[]string{""}, nil, "not a valid name"},
		{[]string{"X"}, map[string]string{"JAIL_SECRET_X": theValue + "\x00"}, "NUL byte"},
		{[]string{"X"}, map[string]string{"JAIL_SECRET_X": strings.Repeat("x", MaxValueSize+1)}, "larger than"},
	} {
		_, err := Resolve(c.names, Options{Override: env(c.override)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%q) = %v; want %q", c.names, err, c.want)
		}
		noValueIn(t, err)
	}
}

// TestValuesPrintNamesOnly: no verb of fmt, no JSON encoding, of Values
// or of a struct holding them, shows a value.
func TestValuesPrintNamesOnly(t *testing.T) {
	v, err := Resolve([]string{"TOKEN"}, Options{Override: env(map[string]string{"JAIL_SECRET_TOKEN": theValue})})
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		Exported Values
		hidden   Values
		ptr      *Values
	}
	h := holder{v, v, &v}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, v), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h), fmt.Sprintf(verb, []Values{v}))
	}
	for _, x := range []any{v, h, &h} {
		data, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(data))
	}
	for _, out := range outs {
		if strings.Contains(out, theValue) || strings.Contains(out, fmt.Sprintf("%x", theValue)) || strings.Contains(out, fmt.Sprintf("%X", theValue)) {
			t.Errorf("printed a value: %s", out)
		}
	}
	if got := fmt.Sprint(v); got != "secrets[TOKEN]" {
		t.Errorf("Sprint = %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeDefinitions writes the definitions file directly, as a user's
// editor would.
func writeDefinitions(t *testing.T, s Store, defs ...Definition) {
	t.Helper()
	data, err := json.Marshal(file{Version: 1, Secrets: defs})
	must(t, err)
	must(t, os.MkdirAll(s.Dir, 0o700))
	must(t, os.WriteFile(filepath.Join(s.Dir, definitionsFile), data, 0o600))
}
