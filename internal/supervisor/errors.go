package supervisor

import "github.com/jail-sandbox/jail/internal/oneline"

// SetupError means jail could not build or start the sandbox; nothing of the
// command ran (jail.SetupError). Its text, as ExecError's, is one line
// (package oneline): the step names what the caller or an image gave (a
// command, a path) as it was given.
type SetupError struct {
	Step string
	Err  error
	// Refused: the request itself was refused (a bad option, an unknown
	// profile or image, a mount source that may not be mounted) before
	// anything was started on the host.
	Refused bool
}

func (e *SetupError) Error() string { return oneline.Escape(e.Step + ": " + e.Err.Error()) }
func (e *SetupError) Unwrap() error { return e.Err }

// ExecError means the sandbox was built but the command could not be
// executed: Code is 127 when it was not found, 126 otherwise
// (jail.ExecError).
type ExecError struct {
	Code   int
	Reason string
}

func (e *ExecError) Error() string { return oneline.Escape(e.Reason) }
