package main

import (
	"errors"
	"flag"
	"io"
	"sort"
	"testing"
)

// TestRunHelpListsEveryFlag: the grouped --help of jail run names every
// flag the command takes, and nothing it does not.
func TestRunHelpListsEveryFlag(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	registered := map[string]bool{}
	fs.VisitAll(func(fl *flag.Flag) { registered[fl.Name] = true })
	delete(registered, "t") // shown with --tty
	listed := map[string]bool{}
	for _, g := range runOptions {
		for _, o := range g.options {
			if listed[o.name] {
				t.Errorf("--%s is listed twice", o.name)
			}
			listed[o.name] = true
			if !registered[o.name] {
				t.Errorf("--%s is in the help but not a flag", o.name)
			}
		}
	}
	var missing []string
	for name := range registered {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("flags missing from the help: %v", missing)
	}
}

// TestFlagErrorsAreOneLineNamingTheOption: a bad option is one line that
// names it as typed and says where the help is.
func TestFlagErrorsAreOneLineNamingTheOption(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "run: unknown option --bogus (see 'jail help run')"},
		{[]string{"-x"}, "run: unknown option -x (see 'jail help run')"},
		{[]string{"--cpus", "two"}, `run: --cpus: invalid value "two" (parse error)`},
		{[]string{"--memory"}, "run: --memory needs a value (see 'jail help run')"},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f runFlags
		f.register(fs)
		err := fs.Parse(c.args)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%v: parsed", c.args)
		}
		if got := flagError("run", err); got != c.want {
			t.Errorf("%v: %q; want %q", c.args, got, c.want)
		}
	}
}
