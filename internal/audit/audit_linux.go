// Package audit writes jail's audit log: one JSON line per thing done to a
// persistent sandbox (create, exec, stop, start, kill, rm, and the stops
// and removals jail makes itself, with a reason such as "ttl" or "idle"),
// saying when, to which sandbox, with which labels and at whose request.
//
// Invariants:
//   - An Event cannot carry an environment: it has no field for one, so no
//     environment value (a secret) can reach the log through it. What an
//     exec ran goes in as its argument vector only.
//   - A line is at most MaxLine bytes, newline included: the arguments of a
//     longer command are cut (then the error, then the labels), and the
//     line says "truncated": true. A line is one write(2) on an O_APPEND
//     descriptor (package appendlog), so the lines of concurrent writers,
//     the CLI's and jail serve's, never interleave.
//   - The log is rotated by size (audit.log to audit.log.1, one old file
//     kept) under an flock on audit.log.lock, and every writer follows a
//     rotation another process made.
//   - Its directory and every directory above it are reached one component
//     at a time from /, never through a symbolic link; each must belong to
//     root or the caller and be writable by no one else (a directory above
//     may be a root-owned sticky one such as /tmp), and the log's own
//     directory, made 0700 when missing, must be the caller's. The files
//     are 0600.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/appendlog"
)

const (
	// DefaultMaxSize is the size past which the log is rotated.
	DefaultMaxSize = 10 << 20
	// MaxLine bounds a line, its newline included.
	MaxLine = 64 << 10
	// rootPath is root's log.
	rootPath = "/var/log/jail/audit.log"
)

// Kinds of events. A stop or removal jail makes on its own (a TTL, an idle
// timeout) is the same kind with Event.Reason saying why.
const (
	Create = "create"
	Exec   = "exec"
	// Net is one connection or HTTP request through the egress gateway,
	// DNS one query to the sandbox's resolver (Event.Net says what).
	Net    = "net"
	DNS    = "dns"
	Stop   = "stop"
	Start  = "start"
	Kill   = "kill"
	Remove = "rm"
)

// Event is one line of the audit log. Its fields are written under the
// JSON names given with each. There is no field for an environment, and
// none is to be added: environment values, secrets among them, never go
// into the audit log.
type Event struct {
	// Time is when it happened ("time", RFC 3339 with nanoseconds, UTC);
	// zero means when Write is called.
	Time time.Time
	// Event is what happened ("event"): Create, Exec, Stop, Start, Kill,
	// Remove.
	Event string
	// Reason says why jail did it on its own ("reason"), as "ttl" or
	// "idle"; empty when a user asked.
	Reason string
	// Sandbox is the sandbox's name ("sandbox").
	Sandbox string
	// Labels are the sandbox's labels ("labels").
	Labels map[string]string
	// UID is the uid of who asked ("uid").
	UID int
	// Command is the argument vector an exec ran ("command"; exec only).
	Command []string
	// User is the user an exec ran as, as --user gave it ("user").
	User string
	// ExitCode is the exit status ("exit_code"; always written for an
	// exec), Signal the signal that ended it ("signal").
	ExitCode, Signal int
	// Duration is how long it took ("duration_ms"), CPU the CPU time it
	// used ("cpu_ms"), PeakMemory its peak memory in bytes
	// ("peak_memory_bytes"); always written for an exec.
	Duration, CPU time.Duration
	PeakMemory    int64
	// Error is why it failed, a jail: line ("error").
	Error string
	// Net is what the egress gateway saw, for Net and DNS events.
	Net *NetDetail
	// ExecPID is an exec's command's host pid ("exec"; exec only): the
	// net and dns lines of what it started carry the same number, the
	// session their process is in.
	ExecPID int
}

// NetDetail is one connection, request or query of a sandbox through its
// egress gateway (docs/egress.md). Hosts, paths and names are at most a
// few KiB: the gateway bounds what it reads.
type NetDetail struct {
	// Via is where it came in: "proxy", "socks", "http" or "tls" (the
	// captured ports 80 and 443), "dns".
	Via string `json:"via"`
	// PID is the sandbox process's pid on the host, when known.
	PID int `json:"pid,omitempty"`
	// Exec is the host pid of its session's leader: an exec's command
	// (the exec line's "exec"), or a run's; 0 when not known. Written as
	// the line's "exec".
	Exec int `json:"-"`
	// Client is the sandbox's end of the connection or query.
	Client string `json:"client,omitempty"`
	// Host and Port are what the sandbox asked for; Address is the
	// address the gateway dialed ("" when it dialed none).
	Host    string `json:"host,omitempty"`
	Port    int    `json:"port,omitempty"`
	Address string `json:"address,omitempty"`
	// Method and Path are an HTTP request's; QueryType and RCode a DNS
	// query's.
	Method    string `json:"method,omitempty"`
	Path      string `json:"path,omitempty"`
	QueryType string `json:"qtype,omitempty"`
	RCode     string `json:"rcode,omitempty"`
	// Verdict is "allowed" or "denied" (a DNS query: also "refused" or
	// "dropped"); Rule the rule that decided, in its canonical form ("":
	// none did); Why says why, in one line.
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Why     string `json:"why,omitempty"`
	// BytesUp and BytesDown are what went each way.
	BytesUp   int64 `json:"bytes_up,omitempty"`
	BytesDown int64 `json:"bytes_down,omitempty"`
}

// line is an Event as written. The numbers of an exec are pointers so
// that a zero (exit 0) is written for an exec and left out for the rest.
type line struct {
	Time            string            `json:"time"`
	Event           string            `json:"event"`
	Reason          string            `json:"reason,omitempty"`
	Sandbox         string            `json:"sandbox"`
	Labels          map[string]string `json:"labels,omitempty"`
	UID             int               `json:"uid"`
	Command         []string          `json:"command,omitempty"`
	User            string            `json:"user,omitempty"`
	ExitCode        *int              `json:"exit_code,omitempty"`
	Signal          int               `json:"signal,omitempty"`
	DurationMS      *int64            `json:"duration_ms,omitempty"`
	CPUMS           *int64            `json:"cpu_ms,omitempty"`
	PeakMemoryBytes *int64            `json:"peak_memory_bytes,omitempty"`
	Error           string            `json:"error,omitempty"`
	Truncated       bool              `json:"truncated,omitempty"`
	Exec            int               `json:"exec,omitempty"`
	*NetDetail
}

func lineOf(e Event) line {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	l := line{
		Time:    t.UTC().Format(time.RFC3339Nano),
		Event:   e.Event,
		Reason:  e.Reason,
		Sandbox: e.Sandbox,
		Labels:  e.Labels,
		UID:     e.UID,
		Command: e.Command,
		User:    e.User,
		Signal:  e.Signal,
		Error:   e.Error,
	}
	l.Exec = e.ExecPID
	if e.Net != nil {
		detail := *e.Net
		l.NetDetail = &detail
		l.Exec = detail.Exec
	}
	exec := e.Event == Exec
	if exec || e.ExitCode != 0 {
		l.ExitCode = &e.ExitCode
	}
	number := func(v int64) *int64 {
		if exec || v != 0 {
			return &v
		}
		return nil
	}
	l.DurationMS = number(e.Duration.Milliseconds())
	l.CPUMS = number(e.CPU.Milliseconds())
	l.PeakMemoryBytes = number(e.PeakMemory)
	return l
}

func encode(l *line) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil { // one line, newline ended
		return nil, err
	}
	return b.Bytes(), nil
}

// Marshal returns e as the log writes it: one JSON line, newline ended, of
// at most MaxLine bytes (see the package comment for what is cut).
func Marshal(e Event) ([]byte, error) {
	l := lineOf(e)
	b, err := encode(&l)
	if err != nil || len(b) <= MaxLine {
		return b, err
	}
	l.Truncated = true
	// What the line holds besides the command, the error and the labels.
	cmd, msg, labels := l.Command, l.Error, l.Labels
	l.Command, l.Error, l.Labels = nil, "", nil
	b, err = encode(&l)
	if err != nil {
		return nil, err
	}
	room := MaxLine - len(b)
	if room < 0 {
		return nil, fmt.Errorf("audit: a line of %d bytes without its command, error and labels: more than %d", len(b), MaxLine)
	}
	if len(labels) > 0 {
		if lb, err := json.Marshal(labels); err == nil && len(`,"labels":`)+len(lb) <= room/2 {
			l.Labels = labels
			room -= len(`,"labels":`) + len(lb)
		}
	}
	if msg != "" {
		l.Error = cut(msg, min(room/2, room-len(`,"error":""`)))
		room -= len(`,"error":`) + quotedLen(l.Error)
	}
	l.Command = cutArgs(cmd, room-len(`,"command":[]`))
	b, err = encode(&l)
	if err == nil && len(b) > MaxLine {
		err = fmt.Errorf("audit: a line of %d bytes after cutting: more than %d", len(b), MaxLine)
	}
	return b, err
}

// quotedLen is the length of s as a JSON string, quotes included.
func quotedLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// cut returns the longest prefix of s, ended on a whole character, whose
// JSON string is at most room bytes (quotes included).
func cut(s string, room int) string {
	if room < 2 {
		return ""
	}
	if quotedLen(s) <= room {
		return s
	}
	// A byte is at most 6 written (\u00XX, or \ufffd for a byte of
	// invalid UTF-8); search between that and one.
	lo, hi := 0, min(len(s), room-2) // s[:lo] fits; s[:hi+1] may not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if quotedLen(prefix(s, mid)) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return prefix(s, lo)
}

// prefix is s[:n] moved back to the start of a character, so that no
// character is split (a split one would be written as U+FFFD, longer).
func prefix(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutArgs returns the leading arguments of args that fit in room bytes as
// a JSON array's elements, the last of them cut.
func cutArgs(args []string, room int) []string {
	out := []string{}
	for i, a := range args {
		need := quotedLen(a)
		if i > 0 {
			need++ // the comma
		}
		if need <= room {
			out = append(out, a)
			room -= need
			continue
		}
		if i > 0 {
			room--
		}
		if c := cut(a, room); c != "" || room >= 2 {
			out = append(out, c)
		}
		break
	}
	return out
}

// DefaultPath is where the audit log of the user uid is:
// /var/log/jail/audit.log for root, $XDG_STATE_HOME/jail/audit.log (by
// default $HOME/.local/state/jail/audit.log) for anyone else (getenv
// reads the environment; a relative path in it is ignored, as the XDG
// base directory specification says). Empty when neither is set.
func DefaultPath(uid int, getenv func(string) string) string {
	if path := getenv("JAIL_AUDIT_LOG"); path != "" {
		return path
	}
	if uid == 0 {
		return rootPath
	}
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "jail", "audit.log")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "jail", "audit.log")
	}
	return ""
}

// Log is an open audit log. A nil *Log writes nothing. Its methods may be
// called from several goroutines.
type Log struct {
	dir  *os.File
	file *appendlog.File
}

// Open opens the audit log at path (absolute), making its directory and
// the file when missing; "-" is no log (nil, nil).
func Open(path string) (*Log, error) {
	return OpenBounded(path, DefaultMaxSize)
}

// OpenBounded is Open with the log rotated past maxSize bytes.
func OpenBounded(path string, maxSize int64) (*Log, error) {
	if path == "-" {
		return nil, nil
	}
	if path == "" {
		return nil, errors.New("audit log: no path (set XDG_STATE_HOME or HOME)")
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("audit log %s: not an absolute path", path)
	}
	path = filepath.Clean(path)
	dir, err := openPrivateDir(filepath.Dir(path), os.Geteuid())
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	f, err := appendlog.Open(dir, filepath.Base(path), maxSize)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Log{dir: dir, file: f}, nil
}

// Write appends e to the log as one line.
func (l *Log) Write(e Event) error {
	if l == nil {
		return nil
	}
	b, err := Marshal(e)
	if err != nil {
		return err
	}
	if err := l.file.Append(b); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// Close closes the log.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	err := l.file.Close()
	if derr := l.dir.Close(); err == nil {
		err = derr
	}
	return err
}

// openPrivateDir opens the directory path (O_PATH), making what is missing
// of it with mode 0700, one component at a time from / without following
// a symbolic link: each directory above must belong to root or uid and be
// writable by neither group nor others, unless it is root's and sticky;
// the last must be uid's and writable by no one else.
func openPrivateDir(path string, uid int) (*os.File, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	walked := "/"
	var names []string
	if path != "/" {
		names = strings.Split(strings.TrimPrefix(path, "/"), "/")
	}
	for _, name := range names {
		if err := checkDir(fd, walked, uid, false); err != nil {
			unix.Close(fd)
			return nil, err
		}
		next := filepath.Join(walked, name)
		child, err := unix.Openat(fd, name, flags, 0)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(fd, name, 0o700); err == nil || err == unix.EEXIST {
				child, err = unix.Openat(fd, name, flags, 0)
			}
		}
		unix.Close(fd)
		switch {
		case err == unix.ELOOP || err == unix.ENOTDIR:
			return nil, fmt.Errorf("%s: a symbolic link or not a directory: give a path of directories only", next)
		case err != nil:
			return nil, &os.PathError{Op: "open", Path: next, Err: err}
		}
		fd, walked = child, next
	}
	if err := checkDir(fd, walked, uid, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), walked), nil
}

// checkDir checks the open directory fd at path: see openPrivateDir.
func checkDir(fd int, path string, uid int, last bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	mode := st.Mode & 0o7777
	switch {
	case last && int(st.Uid) != uid:
		return fmt.Errorf("%s: owned by uid %d, not by uid %d", path, st.Uid, uid)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("%s: owned by uid %d, neither root nor uid %d", path, st.Uid, uid)
	case mode&0o022 != 0 && (last || st.Uid != 0 || mode&unix.S_ISVTX == 0):
		return fmt.Errorf("%s: writable by group or others (mode %04o)", path, mode)
	}
	return nil
}
