package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestResultFieldsAreTheContracts: the result object has the fields of
// CONTRACT.md, in its order (the server writes stdout and stderr first,
// a piece at a time), and "error" only when set. It is the one result type
// of the CLI's --json, the Go API (jail.Result) and the HTTP API.
func TestResultFieldsAreTheContracts(t *testing.T) {
	contract := []string{"stdout", "stderr", "exit_code", "signal", "timed_out", "oom_killed",
		"truncated", "wall_ms", "cpu_ms", "peak_memory_bytes"}
	for _, c := range []struct {
		name string
		res  Result
		want []string
	}{
		{"a command's end", Result{ExitCode: 3}, contract},
		{"a command that could not be executed", Result{ExitCode: ExitNotFound, Error: "jail: exec x: not found"}, append(contract[:len(contract):len(contract)], "error")},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.res)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			var keys []string
			if _, err := dec.Token(); err != nil { // {
				t.Fatal(err)
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k.(string))
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(keys, c.want) {
				t.Errorf("fields %v, want %v", keys, c.want)
			}
		})
	}
}

// TestRunOptionsAreRunRequests: the RUN OPTIONS that POST /v1/sandboxes
// takes are those of POST /v1/run, field for field (name, type and JSON
// name), and RunRequest.Options copies every one of them.
func TestRunOptionsAreRunRequests(t *testing.T) {
	opts, run := reflect.TypeFor[RunOptions](), reflect.TypeFor[RunRequest]()
	var req RunRequest
	rv := reflect.ValueOf(&req).Elem()
	for i := range opts.NumField() {
		f := opts.Field(i)
		rf, ok := run.FieldByName(f.Name)
		if !ok || rf.Type != f.Type || rf.Tag.Get("json") != f.Tag.Get("json") {
			t.Errorf("RunOptions.%s (%s %q) is not RunRequest's", f.Name, f.Type, f.Tag.Get("json"))
			continue
		}
		// A value that is not the zero value of each field.
		v := rv.FieldByName(f.Name)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x" + f.Name)
		case reflect.Float64:
			v.SetFloat(float64(i) + 0.5)
		case reflect.Int:
			v.SetInt(int64(i) + 1)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{f.Name}))
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{f.Name: "v"}))
		default:
			t.Fatalf("RunOptions.%s: a %s, which this test cannot set", f.Name, v.Kind())
		}
	}
	got := req.Options()
	gv := reflect.ValueOf(got)
	for i := range opts.NumField() {
		name := opts.Field(i).Name
		if !reflect.DeepEqual(gv.Field(i).Interface(), rv.FieldByName(name).Interface()) {
			t.Errorf("Options does not copy %s", name)
		}
	}
	// On the wire, a create request's options are spelled as a run's.
	b, err := json.Marshal(CreateRequest{Name: "n", RunOptions: got})
	if err != nil {
		t.Fatal(err)
	}
	var back RunRequest
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Options(), got) {
		t.Errorf("a create request's options read as a run's: %+v, want %+v", back.Options(), got)
	}
}

// TestCheckName: names are one path component of letters, digits, '_',
// '.' and '-', starting with a letter or digit, at most 63 bytes.
func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"0", true}, {"agent-1.session_2", true}, {"Z" + strings.Repeat("z", 62), true},
		{"", false}, {".", false}, {"..", false}, {".hidden", false}, {"-rf", false}, {"_x", false},
		{"a/b", false}, {"../x", false}, {"a b", false}, {"a\x00", false}, {"a\n", false}, {"é", false},
		{"a%2Fb", false}, {"a:b", false}, {"a" + strings.Repeat("z", 63), false},
	} {
		err := CheckName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "sandbox name ") {
			t.Errorf("CheckName(%q): error %q", c.name, err)
		}
	}
	long := strings.Repeat("-", 1<<20)
	if err := CheckName(long); err == nil || len(err.Error()) > 300 {
		t.Errorf("a long bad name's error is %d bytes, want it short", len(err.Error()))
	}
}

// TestCheckLabels: labels a K=V filter can name, with no control
// character, within bounds.
func TestCheckLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{"none", nil, true},
		{"ordinary", map[string]string{"team": "a", "run.id": "42", "app.io/tier": "web", "empty": ""}, true},
		{"value with = and spaces", map[string]string{"k": "a=b c"}, true},
		{"unicode value", map[string]string{"k": "été"}, true},
		{"the longest", map[string]string{"k": strings.Repeat("v", MaxLabelBytes-1)}, true},
		{"empty key", map[string]string{"": "v"}, false},
		{"key with =", map[string]string{"a=b": "v"}, false},
		{"key with a space", map[string]string{"a b": "v"}, false},
		{"unicode key", map[string]string{"équipe": "v"}, false},
		{"too long", map[string]string{"k": strings.Repeat("v", MaxLabelBytes)}, false},
		{"escape in a value", map[string]string{"k": "\x1b[31m"}, false},
		{"newline in a value", map[string]string{"k": "a\nb"}, false},
		{"NUL in a value", map[string]string{"k": "a\x00"}, false},
		{"DEL", map[string]string{"k": "\x7f"}, false},
		{"C1 control", map[string]string{"k": "\u009b"}, false},
		{"too many", many, false},
	} {
		if err := CheckLabels(c.labels); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
