package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoTruncatedPathRuns (issue 23): the init looks a command up in
// fixed-size buffers of PATH_MAX bytes; a PATH entry or a command name
// longer than that, crafted so that its first 4095 bytes name an
// executable (here /workspace/pwned, behind a run of slashes), is refused
// with 126 and one `jail: exec` line, and what a cut would name never runs.
func TestNoTruncatedPathRuns(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ws := sharedTempDir(t, rootless)
		pwned := filepath.Join(ws, "pwned")
		if err := os.WriteFile(pwned, []byte("#!/bin/sh\necho pwned\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(pwned, 0o755)
		os.Chown(pwned, rootless.uid, rootless.gid)
		// The first 4095 bytes (PATH_MAX less its NUL) of each name
		// below are exactly this path.
		cut := strings.Repeat("/", 4095-len("workspace/pwned")) + "workspace/pwned"
		if len(cut) != 4095 {
			t.Fatalf("the cut path is %d bytes", len(cut))
		}
		for _, c := range []struct {
			name string
			args []string
		}{
			{"a PATH entry", []string{"--env", "PATH=" + cut + "/bin:/usr/bin:/bin", "--", "true"}},
			{"a PATH entry cut before its slash", []string{"--env", "PATH=" + cut + ":/usr/bin:/bin", "--", "x"}},
			{"a command name", []string{"--", cut + "/x"}},
		} {
			r := jail(t, m, append([]string{"run", "--workspace", ws}, c.args...)...)
			if strings.Contains(r.stdout, "pwned") {
				t.Errorf("%s: the cut path ran: stdout %q", c.name, r.stdout)
			}
			if r.code != 126 || !strings.HasPrefix(r.stderr, "jail: exec ") {
				t.Errorf("%s: exit %d, stderr %.200q; want 126 and a `jail: exec` line", c.name, r.code, r.stderr)
			}
		}
	})
}

// TestACutMessageSaysSo: an error the init reports that is longer than its
// buffer (a command name of 10000 bytes, in "jail: exec NAME: ...") ends
// in "...", rather than passing for the whole message.
func TestACutMessageSaysSo(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, "run", "--", strings.Repeat("a", 10000))
		if r.code != 126 || !strings.HasPrefix(r.stderr, "jail: exec aaaa") || !strings.HasSuffix(r.stderr, "...\n") {
			t.Errorf("exit %d, stderr %d bytes ending %q; want 126 and a `jail: exec` line ending in ...", r.code, len(r.stderr), r.stderr[max(0, len(r.stderr)-40):])
		}
	})
}
