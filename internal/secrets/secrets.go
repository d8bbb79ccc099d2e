//go:build linux

// Package secrets keeps secrets by logical name: a definition says where a
// secret's value comes from (a file, a variable of the caller's
// environment, or a command's output), and the value is read only when a
// sandbox needs it, into memory, for the commands that ask for it by name.
//
// Invariants:
//   - A value is never written to disk by this package, and never put in
//     an error, a definition, a String, a %v or a JSON encoding of Values.
//     Errors name the secret, the file or the variable, never what was
//     read (a command's stderr, which may hold the value, is dropped).
//   - Definitions live in one file, secrets.json, in the caller's
//     configuration directory (DefaultDir): mode 0600, owned by the caller,
//     in a directory that nobody but root and the caller can change, up to
//     /. A definitions file that is not owned by the caller or that its
//     group or others may read or write is refused, not skipped. It is
//     replaced whole (a fresh file renamed over it) under an exclusive lock
//     on its directory, so concurrent adds and removes lose nothing.
//   - A --from-file file is read through one descriptor opened without
//     following a link or blocking, in its directory opened once, and
//     only when it is a regular file owned by the caller that its group
//     and others cannot read or write, of at most MaxValueSize bytes, in a
//     directory that nobody but root and the caller can change, nor any
//     directory above it (else another user could point the path at
//     another of the caller's files).
//   - Names are environment variable names (ValidName): a value is
//     injected as the variable of its name.
package secrets

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// MaxValueSize bounds a secret's value, however it is read.
const MaxValueSize = 64 << 10

// maxSourceLen bounds the text of a source: a path or a command.
const maxSourceLen = 4096

// ValidName reports whether name can name a secret: an environment
// variable name, [A-Za-z_][A-Za-z0-9_]{0,127}. (By hand, not a
// package-level regexp: compiling one costs every start of jail a quarter
// of a millisecond.)
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ErrUnknown is wrapped by the error about a name no definition (and no
// JAIL_SECRET_ override) gives.
var ErrUnknown = errors.New("no such secret")

// Source says where a secret's value comes from. Exactly one field is set.
// It never holds the value itself.
type Source struct {
	// File is an absolute path to a file holding the value.
	File string `json:"file,omitempty"`
	// Env is the name of a variable of the caller's environment.
	Env string `json:"env,omitempty"`
	// Command is run as /bin/sh -c Command; its standard output is the
	// value.
	Command string `json:"command,omitempty"`
}

// Definition is a secret's name and source.
type Definition struct {
	Name string `json:"name"`
	Source
}

// String is "NAME SOURCE" (the Source's String would be promoted
// otherwise, without the name).
func (d Definition) String() string { return d.Name + " " + d.Source.String() }

// Validate checks that exactly one source is set and that it is well
// formed: an absolute, clean path; a variable name; a command without a
// NUL byte. Both at most 4096 bytes long.
func (s Source) Validate() error {
	set := 0
	for _, f := range []string{s.File, s.Env, s.Command} {
		if f != "" {
			set++
		}
	}
	if set != 1 {
		return errors.New("give exactly one source: --from-file PATH, --from-env VAR or --from-command CMD")
	}
	switch {
	case s.File != "":
		if len(s.File) > maxSourceLen || strings.ContainsRune(s.File, 0) {
			return errors.New("file: path too long or with a NUL byte")
		}
		if !filepath.IsAbs(s.File) || filepath.Clean(s.File) != s.File {
			return fmt.Errorf("file %q: not an absolute, clean path", s.File)
		}
	case s.Env != "":
		if !ValidName(s.Env) {
			return fmt.Errorf("env %q: not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128)", s.Env)
		}
	default:
		if len(s.Command) > maxSourceLen || strings.ContainsRune(s.Command, 0) {
			return errors.New("command: longer than 4096 bytes or with a NUL byte")
		}
	}
	return nil
}

// String describes the source as `jail secret ls` shows it: "file PATH",
// "env VAR" or "command CMD".
func (s Source) String() string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.Env != "":
		return "env " + s.Env
	case s.Command != "":
		return "command " + s.Command
	}
	return "none"
}
