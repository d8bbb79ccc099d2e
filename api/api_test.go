package api

import (
	"bytes"
	"encoding/json"
	"reflect"
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
