package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelativeCommandRunsFromTheWorkdir (issue 23): a command name with a
// slash, and a relative PATH entry, are found from the working directory
// (--workspace, --workdir), as a shell, Docker and bwrap find them, with
// 126 and 127 kept apart; and a PATH entry too long for a path is an error,
// never a truncated path checked or run.
func TestRelativeCommandRunsFromTheWorkdir(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ws := sharedTempDir(t, rootless)
		for _, d := range []string{"bin", "sub"} {
			os.Mkdir(filepath.Join(ws, d), 0o755)
			os.Chown(filepath.Join(ws, d), rootless.uid, rootless.gid)
		}
		script := "#!/bin/sh\necho ran $0 in $(pwd)\n"
		for name, mode := range map[string]os.FileMode{"build.sh": 0o755, "bin/tool": 0o755, "sub/inner": 0o755, "data.txt": 0o644} {
			path := filepath.Join(ws, name)
			os.WriteFile(path, []byte(script), mode)
			os.Chmod(path, mode)
			os.Chown(path, rootless.uid, rootless.gid)
		}
		cases := []struct {
			name string
			args []string
			code int
			out  string
		}{
			{"./build.sh from the workspace", []string{"--workspace", ws, "--", "./build.sh"}, 0, "ran ./build.sh in /workspace\n"},
			{"bin/tool from the workspace", []string{"--workspace", ws, "--", "bin/tool"}, 0, "ran bin/tool in /workspace\n"},
			{"a relative PATH entry", []string{"--workspace", ws, "--env", "PATH=bin:/usr/bin:/bin", "--", "tool"}, 0, "ran bin/tool in /workspace\n"},
			{"from --workdir", []string{"--workspace", ws, "--workdir", "/workspace/sub", "--", "./inner"}, 0, "ran ./inner in /workspace/sub\n"},
			{"missing", []string{"--workspace", ws, "--", "./nope"}, 127, ""},
			{"not executable", []string{"--workspace", ws, "--", "./data.txt"}, 126, ""},
			{"a PATH entry too long", []string{"--env", "PATH=/" + strings.Repeat("a", 5000) + ":/usr/bin", "--", "true"}, 126, ""},
		}
		for _, c := range cases {
			r := jail(t, m, append([]string{"run"}, c.args...)...)
			if r.code != c.code || (c.out != "" && r.stdout != c.out) {
				t.Errorf("%s: exit %d (want %d), stdout %q (want %q), stderr %q", c.name, r.code, c.code, r.stdout, c.out, r.stderr)
			}
			if c.code >= 126 && !strings.HasPrefix(r.stderr, "jail: exec ") {
				t.Errorf("%s: stderr %q; want one `jail: exec` line", c.name, r.stderr)
			}
		}
	})
}
