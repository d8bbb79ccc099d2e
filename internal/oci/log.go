package oci

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jail-sandbox/jail/internal/oneline"
)

// Logger reports a command's errors and warnings as runc does: an error on
// stderr (one line) and, with --log, in the log file as well, where
// containerd's shim reads it on failure (--log-format json: one JSON
// object a line, {"level","msg","time"}).
type Logger struct {
	Stderr io.Writer
	// File is --log's file, or nil.
	File io.Writer
	JSON bool
	// Debug: --debug, debug lines go to the log too.
	Debug bool
	// Command names the subcommand in messages ("create").
	Command string
}

// line is the one line a message becomes: "jail: oci COMMAND: MESSAGE",
// its control characters escaped.
func (l *Logger) line(msg string) string {
	prefix := "jail: oci"
	if l.Command != "" {
		prefix += " " + l.Command
	}
	// Validate's messages start "oci: ", which the prefix says already.
	return oneline.Escape(prefix + ": " + strings.TrimPrefix(msg, "oci: "))
}

// Error reports err.
func (l *Logger) Error(err error) {
	line := l.line(err.Error())
	if l.Stderr != nil {
		fmt.Fprintln(l.Stderr, line)
	}
	l.write("error", line)
}

// Warn reports what the bundle asked that is ignored, or what went wrong
// without failing the command: in the log, or on stderr without one.
func (l *Logger) Warn(msg string) {
	line := l.line("warning: " + msg)
	if l.File == nil && l.Stderr != nil {
		fmt.Fprintln(l.Stderr, line)
		return
	}
	l.write("warning", line)
}

// Debugf logs a step with --debug.
func (l *Logger) Debugf(format string, args ...any) {
	if l.Debug {
		l.write("debug", l.line(fmt.Sprintf(format, args...)))
	}
}

func (l *Logger) write(level, msg string) {
	if l.File == nil {
		return
	}
	now := time.Now().Format(time.RFC3339Nano)
	if l.JSON {
		b, err := json.Marshal(struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Time  string `json:"time"`
		}{level, msg, now})
		if err == nil {
			_, _ = l.File.Write(append(b, '\n'))
		}
		return
	}
	fmt.Fprintf(l.File, "time=%s level=%s msg=%s\n", strconv.Quote(now), level, strconv.Quote(msg))
}
