// Package profiles holds the named policies users choose with --profile:
// what a profile says (Profile: a seccomp policy bundled with the other
// knobs a profile may set: limits, writable space, extra masked and
// read-only paths, network mode, environment) and where profiles are found
// (Store). Built-in profiles (default, strict, build) are embedded; users
// add their own in $XDG_CONFIG_HOME/jail/profiles (~/.config/jail/profiles)
// or /etc/jail/profiles (root: only its own home's and /etc/jail/profiles),
// and a profile may extend another one. Profiles are read only from
// directories and files nobody but root and the caller can change.
//
// Profiles are YAML files, read and resolved onto their parents by package
// profiles/files. This package imports no YAML library, on purpose: it is
// linked into every `jail run`, and yaml.v3's package initialisation (a
// regular expression and Unicode tables) cost each start of jail 0.3-0.4
// ms. A sandbox under a built-in profile takes it as resolved and compiled
// at build time (package seccomp); a user profile is resolved and compiled
// in jail's tools program.
package profiles

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

// FormatVersion is the profile file format this jail reads.
const FormatVersion = 1

// Profile is one profile as written, or resolved.
type Profile struct {
	Version     int    `yaml:"version"`
	Description string `yaml:"description,omitempty"`
	Extends     string `yaml:"extends,omitempty"`
	// Limits default the RUN OPTIONS of the same names; flags win.
	Limits Limits `yaml:"limits,omitempty"`
	// Network is the sandbox's network when --net does not say: "none",
	// or "allow=RULE[,RULE...]" (the egress gateway, docs/egress.md).
	Network string `yaml:"network,omitempty"`
	// NetworkLocked: --net may not change Network, only narrow it to
	// none. A profile extending a locked one is locked too.
	NetworkLocked bool `yaml:"network_locked,omitempty"`
	// Capabilities are what sandbox root keeps (see CapabilitySet): nil
	// when the profile does not say (it then inherits its parent's), an
	// empty list for none. Only names of Grantable may appear.
	Capabilities *[]string `yaml:"capabilities,omitempty"`
	// Masks are extra paths hidden in the sandbox; ReadOnly extra paths
	// made read-only.
	Masks    []string          `yaml:"masks,omitempty"`
	ReadOnly []string          `yaml:"read_only,omitempty"`
	Env      map[string]string `yaml:"env,omitempty"`
	Seccomp  Seccomp           `yaml:"seccomp"`

	// Name and Source say where the profile came from (not in the file).
	Name   string `yaml:"-"`
	Source string `yaml:"-"`
}

// Limits are a profile's defaults for the resource options.
type Limits struct {
	Memory string  `yaml:"memory,omitempty"`
	CPUs   float64 `yaml:"cpus,omitempty"`
	Pids   int     `yaml:"pids,omitempty"`
	// Scratch bounds each writable tmpfs and the writable root layer.
	Scratch string `yaml:"scratch,omitempty"`
}

// Seccomp is the syscall policy. Syscalls the kernel knows but the policy
// does not allow fail with EPERM; syscalls unknown to the filter (newer
// than it) fail with ENOSYS, so a libc falls back to an older call.
type Seccomp struct {
	// Allow lists syscalls allowed whatever their arguments.
	Allow []Syscall `yaml:"allow,omitempty"`
	// AllowIf allows a syscall only when its arguments match.
	AllowIf []Conditional `yaml:"allow_if,omitempty"`
	// Errno answers syscalls with an error, each with why.
	Errno []Denial `yaml:"errno,omitempty"`
	// Drop removes what parent profiles said about these syscalls (allowed
	// or answered with an errno), so this profile can say it anew.
	Drop []Syscall `yaml:"drop,omitempty"`
	// Notes are free text per architecture (documentation only).
	Notes map[string]string `yaml:"notes,omitempty"`
}

// Syscall is a syscall name with where it was written: the line, and the
// profile whose file it is in (a resolved profile mixes its parents').
type Syscall struct {
	Name string
	Line int
	From string
}

// UnmarshalYAML reads a syscall written as a YAML scalar. It has the yaml.v2
// form, which yaml.v3 still calls, so that this package needs no YAML
// import. Anything but a scalar leaves the name empty, and package files
// reports it with its line, which it also records.
func (s *Syscall) UnmarshalYAML(unmarshal func(any) error) error {
	if unmarshal(&s.Name) != nil {
		s.Name = ""
	}
	return nil
}

// MarshalYAML writes a syscall as its name.
func (s Syscall) MarshalYAML() (any, error) { return s.Name, nil }

// MarkFrom records name as the profile every syscall of s is written in.
func (s *Seccomp) MarkFrom(name string) {
	for i := range s.Allow {
		s.Allow[i].From = name
	}
	for i := range s.AllowIf {
		s.AllowIf[i].Syscall.From = name
	}
	for i := range s.Errno {
		for j := range s.Errno[i].Syscalls {
			s.Errno[i].Syscalls[j].From = name
		}
	}
	for i := range s.Drop {
		s.Drop[i].From = name
	}
}

// Conditional allows Syscall when every argument condition holds; several
// entries for one syscall mean any of them.
type Conditional struct {
	Syscall Syscall `yaml:"syscall"`
	Args    []Arg   `yaml:"args"`
	Why     string  `yaml:"why"`
}

// Denial answers Syscalls with Errno (EPERM when empty), when every
// argument condition holds (always when there is none).
type Denial struct {
	Syscalls []Syscall `yaml:"syscalls"`
	Errno    string    `yaml:"errno,omitempty"`
	Args     []Arg     `yaml:"args,omitempty"`
	Why      string    `yaml:"why"`
}

// Arg compares argument Index (0-5): `equals` alone compares the whole
// value; with `mask`, (arg & mask) == equals; `not` compares for
// inequality (whole value only).
type Arg struct {
	Index  uint   `yaml:"index"`
	Equals uint64 `yaml:"equals"`
	Mask   uint64 `yaml:"mask,omitempty"`
	Not    bool   `yaml:"not,omitempty"`
}

// Error is a profile error: `profile NAME: line N: what`.
type Error struct {
	Profile string
	Line    int
	Err     error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("profile %s: line %d: %v", e.Profile, e.Line, e.Err)
	}
	return fmt.Sprintf("profile %s: %v", e.Profile, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrUnknown means no profile of that name exists.
var ErrUnknown = errors.New("unknown profile")

// ValidName: 1 to 64 of a-z 0-9 _ . -, starting with a letter or digit.
// (Not a regexp: compiling one at package init cost every start of jail
// 0.2 ms.)
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ErrBadName is the error of a name ValidName refuses.
var ErrBadName = errors.New("a profile name is 1 to 64 of a-z 0-9 _ . - (starting with a letter or digit)")

// Store finds profiles: user directories first, then the built-ins.
//
// A profile is read only from a directory that nobody but root and the
// caller can change (package privdir: owned by one of them, writable by
// neither group nor others, and so every directory above it), from a file
// of its own there: a regular file, not a symbolic link, owned by root or
// the caller and writable by neither group nor others. A file that fails
// this is not skipped but refused (File.Err), so a run that asks for the
// profile stops with a message saying why.
type Store struct {
	// Dirs are searched in order for NAME.yaml.
	Dirs []string
}

// DefaultStore searches the caller's and the system's profile
// directories: for an ordinary user $XDG_CONFIG_HOME/jail/profiles (or
// ~/.config/jail/profiles), then /etc/jail/profiles. Root reads none of
// what its environment names, which sudo -E or a CI step may have kept
// from another user: only the profiles of root's own home in the password
// database (asked of users; nil reads it), then /etc/jail/profiles.
func DefaultStore(users *privdir.Passwd) Store {
	var dirs []string
	switch {
	case os.Geteuid() == 0:
		if home, err := users.HomeOf(0); err == nil {
			dirs = append(dirs, filepath.Join(home, ".config", "jail", "profiles"))
		}
	case os.Getenv("XDG_CONFIG_HOME") != "":
		dirs = append(dirs, filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "jail", "profiles"))
	default:
		if home, err := os.UserHomeDir(); err == nil {
			dirs = append(dirs, filepath.Join(home, ".config", "jail", "profiles"))
		}
	}
	return Store{Dirs: append(dirs, "/etc/jail/profiles")}
}

// Overrides reports whether one of the store's directories holds a file
// for name, which then shadows the built-in of that name (and is refused,
// by Files, if it cannot be trusted). name must be valid (ValidName).
func (s Store) Overrides(name string) bool {
	for _, d := range s.Dirs {
		if _, err := os.Lstat(filepath.Join(d, name+".yaml")); err == nil {
			return true
		}
	}
	return false
}

// Files are the user profile files of a store, by profile name: what
// resolving a user profile reads, taken at one moment, so that the same
// bytes are what is resolved and what a cached result is keyed by.
type Files map[string]File

// File is one profile file: where it is, and its content or why it could
// not be read.
type File struct {
	Path string `json:"path"`
	Data []byte `json:"data,omitempty"`
	Err  string `json:"error,omitempty"`
}

// MaxFileSize bounds a profile file.
const MaxFileSize = 1 << 20

// Files reads every profile file (NAME.yaml, NAME valid) of the store's
// directories; of two files for one name, the earlier directory's wins. A
// directory that does not exist holds none. A file in a directory that
// is not private to the caller, or that is not a file of its own there
// (see Store), is one that says why, not its content.
func (s Store) Files() Files {
	files := Files{}
	uid := os.Geteuid()
	for _, d := range s.Dirs {
		dir, err := privdir.Open(d, uid, unix.O_RDONLY)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// Its files are named, to be refused: listing a
			// directory trusts nothing it holds.
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if name, ok := profileName(e.Name()); ok && files[name].Path == "" {
					files[name] = File{Path: filepath.Join(d, e.Name()), Err: err.Error()}
				}
			}
			continue
		}
		entries, _ := dir.ReadDir(-1)
		for _, e := range entries {
			name, ok := profileName(e.Name())
			if !ok || files[name].Path != "" {
				continue
			}
			path := filepath.Join(d, e.Name())
			data, err := readOwn(dir, e.Name(), uid)
			if err != nil {
				files[name] = File{Path: path, Err: fmt.Sprintf("%s: %v", path, err)}
				continue
			}
			files[name] = File{Path: path, Data: data}
		}
		dir.Close()
	}
	return files
}

// profileName returns NAME of a file NAME.yaml with a valid name.
func profileName(file string) (string, bool) {
	name, ok := strings.CutSuffix(file, ".yaml")
	return name, ok && ValidName(name)
}

// readOwn reads file in dir (privdir.ReadFile): a regular file of root's
// or uid's that group and others cannot write, of at most MaxFileSize
// bytes, never through a symbolic link.
func readOwn(dir *os.File, file string, uid int) ([]byte, error) {
	data, err := privdir.ReadFile(dir, file, MaxFileSize, 0, uid)
	if err == unix.ELOOP {
		return nil, errors.New("a symbolic link: a profile is read only from a file of its own in its directory")
	}
	return data, err
}

//go:embed builtin/*.yaml
var builtinFS embed.FS

// BuiltinFile returns the YAML of the built-in profile name.
func BuiltinFile(name string) ([]byte, bool) {
	data, err := builtinFS.ReadFile("builtin/" + name + ".yaml")
	return data, err == nil
}

// BuiltinNames lists the built-in profiles.
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(builtinFS, "builtin")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// ErrnoValue returns the number of an errno name such as "EPERM", or 0.
func ErrnoValue(name string) syscall.Errno {
	for e := syscall.Errno(1); e < 256; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}

// Info describes a profile for `jail profile ls`.
type Info struct {
	Name, Source, Description string
}
