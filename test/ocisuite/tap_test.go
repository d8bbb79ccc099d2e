package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestParseTAPCountsTopLevelPoints(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want tapResult
	}{
		{
			name: "passes, skips and a failure with YAML diagnostics",
			in: "TAP version 13\nok 1 - has expected hostname\n  ---\n  {}\n  ...\n" +
				"not ok 2 - root filesystem is readonly\n  ---\n  {\"error\": \"x\"}\n  ...\n" +
				"ok 3 # SKIP linux.mountlabel not set\nok 4 # skip lower case\n1..4\n",
			want: tapResult{Plan: 4, Pass: 1, Fail: 1, Skip: 2, Failures: []tapPoint{
				{Description: "root filesystem is readonly", Diagnostics: "  ---\n  {\"error\": \"x\"}\n  ...\n"},
			}},
		},
		{
			name: "plan first, no numbers, TODO failure is not a failure",
			in:   "1..3\nok\nnot ok # TODO later\nok - escaped \\# is no directive\n",
			want: tapResult{Plan: 3, Pass: 2, Todo: 1},
		},
		{
			name: "indented subtest lines are not counted",
			in:   "    not ok 1 - nested\n    1..1\nok 1 - outer\n1..1\n",
			want: tapResult{Plan: 1, Pass: 1},
		},
		{
			name: "no plan",
			in:   "ok 1 - a\nokay, not a test point\n",
			want: tapResult{Plan: -1, Pass: 1},
		},
		{
			name: "a second stream's plan adds to the first",
			in:   "TAP version 13\nok 1\nok 2\n1..2\nTAP version 13\n1..0\n",
			want: tapResult{Plan: 2, Pass: 2},
		},
		{
			name: "an error diagnostic with no test point",
			in:   "TAP version 13\n  ---\n  {\n    \"error\": \"Hooks MUST be called in the listed order\\nRefer to: x\"\n  }\n  ...\n1..0\n",
			want: tapResult{Plan: 0, Error: "Hooks MUST be called in the listed order"},
		},
		{
			name: "skip-all plan and bail out",
			in:   "1..0 # SKIP no cgroup\nBail out! runtime missing\n",
			want: tapResult{Plan: 0, BailOut: "runtime missing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseTAP([]byte(tt.in))
			if got.Plan != tt.want.Plan || got.Pass != tt.want.Pass || got.Fail != tt.want.Fail ||
				got.Skip != tt.want.Skip || got.Todo != tt.want.Todo || got.BailOut != tt.want.BailOut || got.Error != tt.want.Error ||
				len(got.Failures) != len(tt.want.Failures) {
				t.Fatalf("parseTAP = %+v, want %+v", got, tt.want)
			}
			for i := range got.Failures {
				if got.Failures[i] != tt.want.Failures[i] {
					t.Errorf("failure %d = %+v, want %+v", i, got.Failures[i], tt.want.Failures[i])
				}
			}
		})
	}
}

func TestJudgeFailsRunsWithoutACleanPlan(t *testing.T) {
	ok := tapResult{Plan: 2, Pass: 2}
	tests := []struct {
		name   string
		res    testResult
		runErr error
		ctxErr error
		passed bool
	}{
		{"all ok, exit 0", testResult{TAP: ok}, nil, nil, true},
		{"skips pass", testResult{TAP: tapResult{Plan: 2, Pass: 1, Skip: 1}}, nil, nil, true},
		{"a not ok fails", testResult{TAP: tapResult{Plan: 2, Pass: 1, Fail: 1}}, nil, nil, false},
		{"crash before the plan", testResult{TAP: tapResult{Plan: -1, Pass: 1}, Stderr: "panic: boom\n"}, errExit, nil, false},
		{"fewer points than planned", testResult{TAP: tapResult{Plan: 3, Pass: 2}}, nil, nil, false},
		{"non-zero exit after a full plan", testResult{TAP: ok}, errExit, nil, false},
		{"time limit", testResult{TAP: ok}, errExit, context.DeadlineExceeded, false},
		{"no output and exit 0 (the _fail programs)", testResult{TAP: tapResult{Plan: -1}}, nil, nil, true},
		{"no output and exit 1", testResult{TAP: tapResult{Plan: -1}}, errExit, nil, false},
		{"empty plan with an error diagnostic", testResult{TAP: tapResult{Plan: 0, Error: "hooks out of order"}}, nil, nil, false},
		{"empty plan, no error", testResult{TAP: tapResult{Plan: 0}}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			passed, reason := judge(tt.res, tt.runErr, tt.ctxErr, time.Minute)
			if passed != tt.passed {
				t.Fatalf("judge = %v (%q), want %v", passed, reason, tt.passed)
			}
			if !passed && tt.res.TAP.Fail == 0 && reason == "" {
				t.Errorf("a failure with no failed test point needs a reason")
			}
		})
	}
}

var errExit = errors.New("exit status 1")
