// Package profiles holds the named policies users choose with --profile: one
// YAML file per profile bundles a seccomp policy with the other knobs a
// profile may set (limits, writable space, extra masked and read-only paths,
// network mode, environment).
//
// The format is versioned (`version: 1`); unknown fields are errors, and
// every error names the line it is about. Built-in profiles (default,
// strict, build) are embedded in the binary; users add their own in
// $XDG_CONFIG_HOME/jail/profiles (~/.config/jail/profiles) or
// /etc/jail/profiles, and a profile may extend another one.
//
// Resolving a profile merges it onto its parents: lists are appended, the
// child's scalar settings win, and `drop` removes syscalls the parents
// allowed. The resolved profile is what the seccomp package compiles and
// what `jail profile show` prints.
package profiles

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// FormatVersion is the profile file format this jail reads.
const FormatVersion = 1

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Profile is one profile as written, or resolved.
type Profile struct {
	Version     int    `yaml:"version"`
	Description string `yaml:"description,omitempty"`
	Extends     string `yaml:"extends,omitempty"`
	// Limits default the RUN OPTIONS of the same names; flags win.
	Limits Limits `yaml:"limits,omitempty"`
	// Network is the network mode; only "none" exists so far.
	Network string `yaml:"network,omitempty"`
	// Masks are extra paths hidden in the sandbox; ReadOnly extra paths
	// made read-only.
	Masks    []string          `yaml:"masks,omitempty"`
	ReadOnly []string          `yaml:"read_only,omitempty"`
	Env      map[string]string `yaml:"env,omitempty"`
	Seccomp  Seccomp           `yaml:"seccomp"`

	// Name and Source say where the profile came from (not in the file).
	Name        string `yaml:"-"`
	Source      string `yaml:"-"`
	extendsLine int
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

func (s *Syscall) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a syscall name must be a plain word", n.Line)
	}
	s.Name, s.Line = n.Value, n.Line
	return nil
}

func (s Syscall) MarshalYAML() (any, error) { return s.Name, nil }

func (s *Seccomp) markFrom(name string) {
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

// validName: 1 to 64 of a-z 0-9 _ . -, starting with a letter or digit.
// (Not a regexp: compiling one at package init cost every start of jail
// 0.2 ms.)
func validName(name string) bool {
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

// Store finds profiles: user directories first, then the built-ins.
type Store struct {
	// Dirs are searched in order for NAME.yaml.
	Dirs []string
}

// DefaultStore searches the user's and the system's profile directories.
func DefaultStore() Store {
	var dirs []string
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "jail", "profiles"))
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".config", "jail", "profiles"))
	}
	return Store{Dirs: append(dirs, "/etc/jail/profiles")}
}

// Load reads one profile as written, without resolving its parents.
func (s Store) Load(name string) (*Profile, error) {
	if !validName(name) {
		return nil, &Error{Profile: name, Err: errors.New("a profile name is 1 to 64 of a-z 0-9 _ . - (starting with a letter or digit)")}
	}
	for _, d := range s.Dirs {
		path := filepath.Join(d, name+".yaml")
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, &Error{Profile: name, Err: err}
		}
		return Parse(name, path, data)
	}
	data, err := builtinFS.ReadFile("builtin/" + name + ".yaml")
	if err != nil {
		return nil, &Error{Profile: name, Err: ErrUnknown}
	}
	return Parse(name, "built-in", data)
}

// Overrides reports whether one of the store's directories holds a file
// for name, which then shadows the built-in of that name.
func (s Store) Overrides(name string) bool {
	for _, d := range s.Dirs {
		if _, err := os.Lstat(filepath.Join(d, name+".yaml")); err == nil {
			return true
		}
	}
	return false
}

// Resolve loads name and merges it onto its parents.
func (s Store) Resolve(name string) (*Profile, error) {
	return s.resolve(name, map[string]bool{})
}

func (s Store) resolve(name string, seen map[string]bool) (*Profile, error) {
	if seen[name] {
		return nil, &Error{Profile: name, Err: errors.New("extends itself (a cycle)")}
	}
	seen[name] = true
	p, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	if p.Extends == "" {
		return p, nil
	}
	if p.Extends == name {
		// A user file may extend the built-in of the same name.
		parent, err := Store{}.resolve(name, map[string]bool{})
		if err != nil {
			return nil, err
		}
		return merge(parent, p), nil
	}
	parent, err := s.resolve(p.Extends, seen)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) && errors.Is(err, ErrUnknown) {
			return nil, &Error{Profile: name, Line: p.extendsLine, Err: fmt.Errorf("extends unknown profile %q", p.Extends)}
		}
		return nil, err
	}
	return merge(parent, p), nil
}

// merge lays child over parent.
func merge(parent, child *Profile) *Profile {
	out := *child
	out.Extends = ""
	if out.Description == "" {
		out.Description = parent.Description
	}
	if out.Network == "" {
		out.Network = parent.Network
	}
	if out.Limits.Memory == "" {
		out.Limits.Memory = parent.Limits.Memory
	}
	if out.Limits.CPUs == 0 {
		out.Limits.CPUs = parent.Limits.CPUs
	}
	if out.Limits.Pids == 0 {
		out.Limits.Pids = parent.Limits.Pids
	}
	if out.Limits.Scratch == "" {
		out.Limits.Scratch = parent.Limits.Scratch
	}
	out.Masks = append(append([]string{}, parent.Masks...), child.Masks...)
	out.ReadOnly = append(append([]string{}, parent.ReadOnly...), child.ReadOnly...)
	out.Env = map[string]string{}
	for k, v := range parent.Env {
		out.Env[k] = v
	}
	for k, v := range child.Env {
		out.Env[k] = v
	}
	if len(out.Env) == 0 {
		out.Env = nil
	}
	dropped := map[string]bool{}
	for _, d := range child.Seccomp.Drop {
		dropped[d.Name] = true
	}
	var allow []Syscall
	for _, a := range parent.Seccomp.Allow {
		if !dropped[a.Name] {
			allow = append(allow, a)
		}
	}
	var allowIf []Conditional
	for _, c := range parent.Seccomp.AllowIf {
		if !dropped[c.Syscall.Name] {
			allowIf = append(allowIf, c)
		}
	}
	out.Seccomp.Allow = append(allow, child.Seccomp.Allow...)
	out.Seccomp.AllowIf = append(allowIf, child.Seccomp.AllowIf...)
	var errnos []Denial
	for _, d := range parent.Seccomp.Errno {
		kept := d
		kept.Syscalls = nil
		for _, sc := range d.Syscalls {
			if !dropped[sc.Name] {
				kept.Syscalls = append(kept.Syscalls, sc)
			}
		}
		if len(kept.Syscalls) > 0 {
			errnos = append(errnos, kept)
		}
	}
	out.Seccomp.Errno = append(errnos, child.Seccomp.Errno...)
	out.Seccomp.Drop = nil
	notes := map[string]string{}
	for k, v := range parent.Seccomp.Notes {
		notes[k] = v
	}
	for k, v := range child.Seccomp.Notes {
		notes[k] = v
	}
	if len(notes) > 0 {
		out.Seccomp.Notes = notes
	}
	return &out
}

// Parse reads a profile file.
func Parse(name, source string, data []byte) (*Profile, error) {
	var p Profile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, yamlError(name, err)
	}
	p.Name, p.Source = name, source
	p.Seccomp.markFrom(name)
	if p.Version != FormatVersion {
		return nil, &Error{Profile: name, Line: 1, Err: fmt.Errorf("version %d: this jail reads version %d", p.Version, FormatVersion)}
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	p.extendsLine = lineOf(&root, "extends")
	if p.Extends != "" && !validName(p.Extends) {
		return nil, &Error{Profile: name, Line: p.extendsLine, Err: fmt.Errorf("extends %q: not a profile name", p.Extends)}
	}
	if p.Network != "" && p.Network != "none" {
		return nil, &Error{Profile: name, Line: lineOf(&root, "network"), Err: fmt.Errorf("network %q: only none is supported", p.Network)}
	}
	for _, path := range append(append([]string{}, p.Masks...), p.ReadOnly...) {
		if !filepath.IsAbs(path) || strings.Contains(path, "..") {
			return nil, &Error{Profile: name, Line: lineOf(&root, "masks"), Err: fmt.Errorf("path %q must be absolute, without ..", path)}
		}
	}
	for _, d := range p.Seccomp.Errno {
		if len(d.Syscalls) == 0 {
			return nil, &Error{Profile: name, Err: errors.New("an errno entry names no syscalls")}
		}
		if d.Errno != "" && ErrnoValue(d.Errno) == 0 {
			return nil, &Error{Profile: name, Line: d.Syscalls[0].Line, Err: fmt.Errorf("errno %q is not an errno name (EPERM, ENOSYS, ...)", d.Errno)}
		}
	}
	for _, c := range append(p.Seccomp.AllowIf, conditionalsOf(p.Seccomp.Errno)...) {
		for _, a := range c.Args {
			if a.Index > 5 {
				return nil, &Error{Profile: name, Line: c.Syscall.Line, Err: fmt.Errorf("%s: argument index %d: syscalls have 6", c.Syscall.Name, a.Index)}
			}
			if a.Not && a.Mask != 0 {
				return nil, &Error{Profile: name, Line: c.Syscall.Line, Err: fmt.Errorf("%s: `not` compares whole values, without mask", c.Syscall.Name)}
			}
		}
	}
	return &p, nil
}

func conditionalsOf(ds []Denial) []Conditional {
	var out []Conditional
	for _, d := range ds {
		for _, s := range d.Syscalls {
			out = append(out, Conditional{Syscall: s, Args: d.Args})
		}
	}
	return out
}

// yamlError turns a yaml.v3 error ("yaml: line 3: ...", or a list of
// "line N: ..." unmarshal errors) into one line about the first problem.
func yamlError(name string, err error) error {
	msg := err.Error()
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	if errors.Is(err, errEOF) || msg == "EOF" {
		msg = "empty file"
	}
	return &Error{Profile: name, Line: line, Err: errors.New(strings.ReplaceAll(msg, "\n", " "))}
}

var errEOF = errors.New("EOF")

// lineOf finds the line of a top-level key.
func lineOf(root *yaml.Node, key string) int {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i].Line
		}
	}
	return 0
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

// List returns every profile the store can find, user ones shadowing
// built-ins of the same name.
func (s Store) List() ([]Info, error) {
	seen := map[string]bool{}
	var out []Info
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		info := Info{Name: name}
		if p, err := s.Load(name); err == nil {
			info.Source, info.Description = p.Source, p.Description
		} else {
			info.Source, info.Description = "invalid", err.Error()
		}
		out = append(out, info)
	}
	for _, d := range s.Dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && validName(name) {
				add(name)
			}
		}
	}
	builtins, _ := builtinFS.ReadDir("builtin")
	for _, e := range builtins {
		add(strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Marshal renders a profile as YAML.
func Marshal(p *Profile) ([]byte, error) {
	return yaml.Marshal(p)
}
