//go:build linux

package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jail-sandbox/jail/internal/privdir"
	"golang.org/x/sys/unix"
)

// DefaultCommandTimeout bounds a --from-command source when
// Options.CommandTimeout is 0.
const DefaultCommandTimeout = 10 * time.Second

// OverridePrefix is the prefix of the variables Options.Override is asked
// for: JAIL_SECRET_<NAME>.
const OverridePrefix = "JAIL_SECRET_"

// Options say where Resolve finds definitions and values.
type Options struct {
	// Store holds the definitions; its UID is the owner a --from-file
	// file must have. It is read only when a name is not overridden.
	Store Store
	// Getenv is the caller's environment, which --from-env sources read
	// (os.Getenv for the CLI; a server passes its client's). nil: an
	// --from-env source fails.
	Getenv func(string) string
	// Override, when not nil, is asked first for JAIL_SECRET_<NAME>: a
	// non-empty answer is the value of NAME, defined or not (jail serve
	// passes its own os.Getenv).
	Override func(string) string
	// CommandTimeout bounds each --from-command; 0 is
	// DefaultCommandTimeout.
	CommandTimeout time.Duration
}

// Resolve reads the value of each of names (duplicates once), in order,
// and returns them in memory. A name that is neither overridden nor
// defined is an error wrapping ErrUnknown that names it. Sources:
//   - file: the file, opened once without following a link, must be a
//     regular file owned by Store.UID that its group and others can
//     neither read nor write, of at most MaxValueSize bytes;
//   - env: the variable, which must be set and not empty;
//   - command: /bin/sh -c CMD with this process's environment, stdin
//     /dev/null, stderr discarded (it may hold the value), killed after
//     the timeout; it must exit 0 and print at most MaxValueSize bytes.
//
// One trailing newline is removed from a file's content and a command's
// output (echo, pass show and editors add one). A value may not contain a
// NUL byte, which no environment variable can hold. No error holds a
// value.
func Resolve(names []string, opts Options) (Values, error) {
	v := Values{&valueSet{}}
	var defs []Definition
	read := false
	for _, name := range names {
		if !ValidName(name) {
			return Values{}, fmt.Errorf("secret %q: not a valid name ([A-Za-z_][A-Za-z0-9_]*, at most 128)", name)
		}
		if _, ok := v.Value(name); ok {
			continue
		}
		if opts.Override != nil {
			if value := opts.Override(OverridePrefix + name); value != "" {
				if err := checkValue(name, value); err != nil {
					return Values{}, err
				}
				v.set.entries = append(v.set.entries, entry{name, &value})
				continue
			}
		}
		if !read {
			var err error
			if defs, err = opts.Store.List(); err != nil {
				return Values{}, err
			}
			read = true
		}
		var src *Source
		for i := range defs {
			if defs[i].Name == name {
				src = &defs[i].Source
			}
		}
		if src == nil {
			return Values{}, fmt.Errorf("secret %s: %w (see 'jail secret ls')", name, ErrUnknown)
		}
		value, err := readValue(name, *src, opts)
		if err != nil {
			return Values{}, err
		}
		if err := checkValue(name, value); err != nil {
			return Values{}, err
		}
		v.set.entries = append(v.set.entries, entry{name, &value})
	}
	return v, nil
}

func checkValue(name, value string) error {
	if len(value) > MaxValueSize {
		return fmt.Errorf("secret %s: value larger than %d bytes", name, MaxValueSize)
	}
	if strings.IndexByte(value, 0) >= 0 {
		return fmt.Errorf("secret %s: value contains a NUL byte, which an environment variable cannot hold", name)
	}
	return nil
}

// readValue reads the value src gives.
func readValue(name string, src Source, opts Options) (string, error) {
	switch {
	case src.File != "":
		value, err := readValueFile(src.File, opts.Store.UID)
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", name, err)
		}
		return value, nil
	case src.Env != "":
		var value string
		if opts.Getenv != nil {
			value = opts.Getenv(src.Env)
		}
		if value == "" {
			return "", fmt.Errorf("secret %s: $%s is not set or empty", name, src.Env)
		}
		return value, nil
	case src.Command != "":
		value, err := runCommand(src.Command, opts.CommandTimeout)
		if err != nil {
			return "", fmt.Errorf("secret %s: its command %w", name, err)
		}
		return value, nil
	}
	return "", fmt.Errorf("secret %s: no source", name)
}

// openValueFile opens path for reading when it is a private file of uid
// (see checkPrivateFile) in a directory that nobody but root and uid can
// change, nor any directory above it (package privdir): otherwise whoever
// could rename an entry on the way could point the path at another file
// of uid's, whose content the sandbox would then get. The directory is
// opened once and the file opened in it without following a link or
// blocking on a FIFO.
func openValueFile(path string, uid int) (*os.File, error) {
	dir, err := privdir.Open(filepath.Dir(path), uid, unix.O_PATH)
	if err != nil {
		return nil, fmt.Errorf("%s: its directory: %w", path, err)
	}
	defer dir.Close()
	fd, err := unix.Openat(int(dir.Fd()), filepath.Base(path), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return nil, fmt.Errorf("%s: a symbolic link (name the file itself)", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := checkPrivateFile(fd, uid, MaxValueSize); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// readValueFile reads the value in the file at path, through the one
// descriptor openValueFile checked.
func readValueFile(path string, uid int) (string, error) {
	f, err := openValueFile(path, uid)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxValueSize+1))
	if err != nil {
		// The error of a read names the file and the errno, not data.
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxValueSize {
		return "", fmt.Errorf("%s: larger than %d bytes", path, MaxValueSize)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

// runCommand runs /bin/sh -c command and returns its output less one
// trailing newline. Only sh is killed at the timeout: a separate process
// group would take the terminal from a pinentry the command starts. A
// process left holding the output is waited for at most a second.
func runCommand(command string, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	out := &boundedBuffer{max: MaxValueSize}
	cmd.Stdout = out // stdin and stderr: /dev/null
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("did not finish within %v (killed)", timeout)
	case errors.As(err, &exitErr):
		// ExitError.Error says "exit status N" or "signal: S"; its
		// Stderr is empty, stderr was not captured.
		return "", fmt.Errorf("failed: %s (its stderr is not shown: it may hold the value)", exitErr.ProcessState)
	case errors.Is(err, exec.ErrWaitDelay):
		return "", errors.New("left a process holding its output open")
	case err != nil:
		return "", fmt.Errorf("could not run: %w", err)
	case out.over:
		return "", fmt.Errorf("printed more than %d bytes", MaxValueSize)
	}
	return strings.TrimSuffix(out.buf.String(), "\n"), nil
}

// boundedBuffer keeps the first max+1 bytes written to it and drops the
// rest, so that a command printing without end is not stopped by a broken
// pipe but is refused.
type boundedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil
}
