package main

import (
	"fmt"
	"io"
	"strings"
)

// report is a whole run, as -json writes it.
type report struct {
	Suite    string                  `json:"suite"` // module@version
	Machine  string                  `json:"machine"`
	Runtimes []ociRuntime            `json:"runtimes"`
	Tests    []string                `json:"tests"`
	Seconds  map[string]float64      `json:"seconds"` // per runtime, the whole suite
	Results  map[string][]testResult `json:"results"` // per runtime, in Tests' order
}

// cell is one program's result as a table cell: "12/12", "10/12 (2
// skipped)", "9/12 (3 failed)" (test points that passed of those
// reported), or "FAIL: reason" when the program's run itself failed.
func cell(r testResult) string {
	t := r.TAP
	switch {
	case !r.Passed && r.Reason != "":
		return "FAIL: " + mdEscape(r.Reason)
	case r.Passed && t.points() == 0 && t.Plan < 0:
		return "pass (exit 0, no TAP)"
	case r.Passed && t.points() == 0:
		return "pass (no test point)"
	}
	var notes []string
	if t.Skip > 0 {
		notes = append(notes, fmt.Sprintf("%d skipped", t.Skip))
	}
	if t.Fail > 0 {
		notes = append(notes, fmt.Sprintf("%d failed", t.Fail))
	}
	if t.Todo > 0 {
		notes = append(notes, fmt.Sprintf("%d todo", t.Todo))
	}
	s := fmt.Sprintf("%d/%d", t.Pass, t.points())
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	if r.Passed {
		return s
	}
	return "**" + s + "**"
}

// writeMarkdown prints the table: one row per program, one column per
// runtime, then the totals and what the harness had to clean up.
func writeMarkdown(w io.Writer, rep report) {
	fmt.Fprintf(w, "Suite: `%s`; machine: %s.\n\n", rep.Suite, rep.Machine)
	for _, rt := range rep.Runtimes {
		fmt.Fprintf(w, "- %s: `%s` (%s)\n", rt.Name, rt.Path, rt.Version)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| test |")
	for _, rt := range rep.Runtimes {
		fmt.Fprintf(w, " %s |", rt.Name)
	}
	fmt.Fprint(w, "\n|---|")
	for range rep.Runtimes {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for i, test := range rep.Tests {
		fmt.Fprintf(w, "| %s |", test)
		for _, rt := range rep.Runtimes {
			if rs := rep.Results[rt.Name]; i < len(rs) {
				fmt.Fprintf(w, " %s |", cell(rs[i]))
			} else {
				fmt.Fprint(w, " not run |")
			}
		}
		fmt.Fprintln(w)
	}

	rows := []struct {
		label string
		value func(rs []testResult) int
	}{
		{"programs passed", func(rs []testResult) int { return count(rs, func(r testResult) bool { return r.Passed }) }},
		{"programs failed", func(rs []testResult) int { return count(rs, func(r testResult) bool { return !r.Passed }) }},
		{"test points ok", func(rs []testResult) int { return sum(rs, func(t tapResult) int { return t.Pass }) }},
		{"test points not ok", func(rs []testResult) int { return sum(rs, func(t tapResult) int { return t.Fail }) }},
		{"test points skipped", func(rs []testResult) int { return sum(rs, func(t tapResult) int { return t.Skip }) }},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "| **%s** |", row.label)
		for _, rt := range rep.Runtimes {
			fmt.Fprintf(w, " %d |", row.value(rep.Results[rt.Name]))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "| **time (s)** |")
	for _, rt := range rep.Runtimes {
		fmt.Fprintf(w, " %.0f |", rep.Seconds[rt.Name])
	}
	fmt.Fprintln(w)

	var left []string
	for _, rt := range rep.Runtimes {
		for _, r := range rep.Results[rt.Name] {
			for _, l := range r.Leftovers {
				left = append(left, fmt.Sprintf("- %s, %s: %s", rt.Name, r.Test, l))
			}
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "\nLeft behind, and removed by the harness:\n\n%s\n", strings.Join(left, "\n"))
	}
}

func count(rs []testResult, f func(testResult) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}

func sum(rs []testResult, f func(tapResult) int) int {
	n := 0
	for _, r := range rs {
		n += f(r.TAP)
	}
	return n
}

// mdEscape keeps a reason on one table row.
func mdEscape(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:157]) + "..."
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
