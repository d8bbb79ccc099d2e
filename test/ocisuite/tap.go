package main

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// tapResult is what one validation program's TAP stream reported. Only the
// top-level stream counts: indented lines (YAML diagnostics, subtests) are
// kept as the diagnostics of the test point before them.
type tapResult struct {
	Plan    int    `json:"plan"` // -1: no plan line was seen
	Pass    int    `json:"pass"` // ok, not skipped
	Fail    int    `json:"fail"` // not ok, not TODO
	Skip    int    `json:"skip"` // ok # SKIP
	Todo    int    `json:"todo"` // not ok # TODO: not a failure in TAP
	BailOut string `json:"bailOut,omitempty"`
	// Error is the first "error" of a diagnostics block: some programs
	// (the hooks tests) report a failure only so, with no test point.
	Error    string     `json:"error,omitempty"`
	Failures []tapPoint `json:"failures,omitempty"`
}

// tapPoint is one failed test point and the diagnostics printed under it.
type tapPoint struct {
	Description string `json:"description"`
	Diagnostics string `json:"diagnostics,omitempty"`
}

// maxDiagnostics bounds what is kept of one test point's diagnostics: the
// full stream is in the JSON results anyway.
const maxDiagnostics = 4096

// points is how many test points the stream reported.
func (r tapResult) points() int { return r.Pass + r.Fail + r.Skip + r.Todo }

// parseTAP reads a TAP 12/13 stream as the validation programs print it
// (github.com/mndrix/tap-go, or runtimetest's own output passed through).
func parseTAP(out []byte) tapResult {
	r := tapResult{Plan: -1}
	// Diagnostics go to the last failed point until the next top-level line.
	collecting := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			if r.Error == "" {
				r.Error = diagnosticError(line)
			}
			if collecting {
				p := &r.Failures[len(r.Failures)-1]
				if len(p.Diagnostics) < maxDiagnostics {
					p.Diagnostics += line + "\n"
				}
			}
			continue
		}
		collecting = false
		switch {
		case strings.HasPrefix(line, "ok"), strings.HasPrefix(line, "not ok"):
			failed := strings.HasPrefix(line, "not ok")
			rest := strings.TrimPrefix(strings.TrimPrefix(line, "not ok"), "ok")
			if rest != "" && rest[0] != ' ' {
				continue // "okay...", not a test point
			}
			desc, directive := splitDirective(rest)
			switch {
			case strings.HasPrefix(directive, "SKIP"):
				r.Skip++
			case strings.HasPrefix(directive, "TODO"):
				if failed {
					r.Todo++
				} else {
					r.Pass++
				}
			case failed:
				r.Fail++
				r.Failures = append(r.Failures, tapPoint{Description: desc})
				collecting = true
			default:
				r.Pass++
			}
		case strings.HasPrefix(line, "1.."):
			n := strings.TrimPrefix(line, "1..")
			if i := strings.IndexAny(n, " #"); i >= 0 {
				n = n[:i]
			}
			// Some programs print a second stream ("TAP version 13",
			// "1..0") after the first: the plans add up.
			if v, err := strconv.Atoi(n); err == nil {
				r.Plan = max(r.Plan, 0) + v
			}
		case strings.HasPrefix(line, "Bail out!"):
			r.BailOut = strings.TrimSpace(strings.TrimPrefix(line, "Bail out!"))
			if r.BailOut == "" {
				r.BailOut = "bailed out"
			}
		}
	}
	return r
}

// splitDirective splits what follows "ok"/"not ok" into the description
// (test number and leading "- " dropped) and the upper-cased directive
// after an unescaped '#', if any.
func splitDirective(rest string) (desc, directive string) {
	rest = strings.TrimSpace(rest)
	// The test number is optional.
	if i := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' }); i != 0 {
		if i < 0 {
			i = len(rest)
		}
		rest = strings.TrimSpace(rest[i:])
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] == '\\' {
			i++
			continue
		}
		if rest[i] == '#' {
			directive = strings.ToUpper(strings.TrimSpace(rest[i+1:]))
			rest = rest[:i]
			break
		}
	}
	desc = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "- "))
	return desc, directive
}

// diagnosticError returns the value of an "error" key on a diagnostics
// line (tap-go writes its YAML blocks as JSON), or "".
func diagnosticError(line string) string {
	line = strings.TrimSpace(line)
	for _, key := range []string{`"error":`, "error:"} {
		if v, ok := strings.CutPrefix(line, key); ok {
			v = strings.TrimSuffix(strings.TrimSpace(v), ",")
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			if first, _, _ := strings.Cut(v, "\n"); first != "" {
				return first
			}
			return "error"
		}
	}
	return ""
}
