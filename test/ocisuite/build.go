package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// suiteModule is the Go module whose validation programs make the suite.
const suiteModule = "github.com/opencontainers/runtime-tools"

// completeStamp marks a finished build; its content says what was built
// with which toolchain, so a toolchain change rebuilds.
const completeStamp = ".complete"

// suite is a built copy of the validation programs, laid out as upstream's
// Makefile runs them: each program is started in Dir and reads
// "runtimetest" and "rootfs-<arch>.tar.gz" from there.
type suite struct {
	Version string
	Dir     string
	Tests   []string // program names, sorted
}

// program is the path of one validation program.
func (s suite) program(test string) string { return filepath.Join(s.Dir, "validation", test) }

// goEnv is the environment of every go command the build runs: the module
// is built from the read-only module cache with its own go.mod and go.sum
// (its vendor directory is not in the module zip, hence -mod=mod), outside
// any workspace, with the toolchain at hand.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local")
}

// buildSuite returns the suite for version under cacheDir, building it
// first unless an earlier run already did with the same toolchain.
func buildSuite(ctx context.Context, cacheDir, version string, log io.Writer) (suite, error) {
	goVersion, err := output(ctx, "", nil, "go", "env", "GOVERSION")
	if err != nil {
		return suite{}, err
	}
	// The go commands run in the module's directory: every path given
	// them must be absolute.
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return suite{}, err
	}
	stamp := fmt.Sprintf("%s@%s %s/%s %s\n", suiteModule, version, runtime.GOOS, runtime.GOARCH, strings.TrimSpace(goVersion))
	dir := filepath.Join(cacheDir, version)
	if got, err := os.ReadFile(filepath.Join(dir, completeStamp)); err == nil && string(got) == stamp {
		return listSuite(dir, version)
	}

	fmt.Fprintf(log, "ocisuite: building %s@%s into %s\n", suiteModule, version, dir)
	src, err := downloadModule(ctx, version)
	if err != nil {
		return suite{}, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return suite{}, err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return suite{}, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return suite{}, err
	}

	// As upstream's Makefile: runtimetest runs inside the test containers,
	// whose root file system has no C library, so it is linked statically;
	// the validation programs run on the host.
	ldflags := "-X main.version=" + version
	static := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "netgo osusergo",
		"-ldflags", ldflags, "-o", filepath.Join(tmp, "runtimetest"), "./cmd/runtimetest")
	static.Env = append(goEnv(), "CGO_ENABLED=0")
	programs := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags,
		"-o", filepath.Join(tmp, "validation")+"/", "./validation/...")
	programs.Env = goEnv()
	for _, cmd := range []*exec.Cmd{static, programs} {
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return suite{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	rootfs := "rootfs-" + runtime.GOARCH + ".tar.gz"
	if err := copyFile(filepath.Join(src, rootfs), filepath.Join(tmp, rootfs)); err != nil {
		return suite{}, fmt.Errorf("the suite's root file system: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeStamp), []byte(stamp), 0o644); err != nil {
		return suite{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return suite{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return suite{}, err
	}
	return listSuite(dir, version)
}

// downloadModule fetches the module through the Go module proxy (checked
// against go.sum's database as any module) and returns its directory in
// the module cache.
func downloadModule(ctx context.Context, version string) (string, error) {
	out, err := output(ctx, os.TempDir(), goEnv(), "go", "mod", "download", "-json", suiteModule+"@"+version)
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal([]byte(out), &info); jerr != nil || info.Dir == "" {
		if info.Error != "" {
			return "", fmt.Errorf("go mod download %s@%s: %s", suiteModule, version, info.Error)
		}
		if err == nil {
			err = fmt.Errorf("no module directory in %q", out)
		}
		return "", fmt.Errorf("go mod download %s@%s: %w", suiteModule, version, err)
	}
	return info.Dir, nil
}

// listSuite names the validation programs of a built suite.
func listSuite(dir, version string) (suite, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "validation"))
	if err != nil {
		return suite{}, err
	}
	s := suite{Version: version, Dir: dir}
	for _, e := range entries {
		if e.Type().IsRegular() {
			s.Tests = append(s.Tests, e.Name())
		}
	}
	sort.Strings(s.Tests)
	if len(s.Tests) == 0 {
		return suite{}, fmt.Errorf("%s: no validation programs", dir)
	}
	return s, nil
}

// output runs a command and returns its standard output; its standard
// error is in the error.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	// A child left holding the pipes must not keep the caller waiting.
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
