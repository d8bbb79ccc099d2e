// Package sandboxlog is the combined output log of a persistent sandbox's
// execs (what `jail logs` shows), kept in the sandbox's state directory
// and bounded on disk.
//
// Invariants:
//   - The clients of several execs, in several processes, append to `log`
//     at once, each chunk with one write(2) on an O_APPEND descriptor
//     (package appendlog), so chunks never interleave; a chunk is at most
//     MaxChunk bytes.
//   - `log` is rotated to `log.1` (one old file kept) before a chunk that
//     would take it past the bound, under an flock on `log.lock`, so the
//     sandbox's logs take at most 2 x the bound, plus what one chunk
//     adds past it.
//   - A stream written through a LineWriter reaches the log as whole lines
//     only: a line is held until its newline, up to MaxLinePending bytes,
//     so that the lines of concurrent execs never mix mid-line.
//   - The files are reached from the directory's descriptor by openat
//     without following a symbolic link; they are regular files of the
//     caller, 0600.
package sandboxlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/jail-sandbox/jail/internal/appendlog"
)

const (
	// Name is the log's file in the sandbox's directory; the rotated one
	// is Name+".1", the rotation's lock Name+".lock".
	Name = "log"
	// DefaultBound is the size past which the log is rotated.
	DefaultBound = 1 << 20
	// MaxChunk bounds one append: a longer write is cut into chunks, at
	// a newline when there is one.
	MaxChunk = 64 << 10
	// MaxLinePending bounds what a LineWriter holds while it waits for a
	// newline.
	MaxLinePending = 4 << 10
)

// Log is a sandbox's log open for appending. Its methods may be called
// from several goroutines.
type Log struct {
	file *appendlog.File
}

// Open opens (making it when missing) the log in dir, the sandbox's
// directory (it may be opened O_PATH; it must stay open while the Log is
// used), to be rotated past bound bytes (bound <= 0: DefaultBound).
func Open(dir *os.File, bound int64) (*Log, error) {
	if bound <= 0 {
		bound = DefaultBound
	}
	f, err := appendlog.Open(dir, Name, bound)
	if err != nil {
		return nil, fmt.Errorf("sandbox log: %w", err)
	}
	return &Log{file: f}, nil
}

// Write appends p to the log as it is, in chunks of at most MaxChunk
// bytes, each ended at its last newline when it has one.
func (l *Log) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := len(p)
		if n > MaxChunk {
			n = MaxChunk
			if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
				n = i + 1
			}
		}
		if err := l.file.Append(p[:n]); err != nil {
			return written, fmt.Errorf("sandbox log: %w", err)
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Close closes the log.
func (l *Log) Close() error { return l.file.Close() }

// LineWriter is one exec stream's writer to a Log: it appends whole lines.
// It holds a line until its newline comes; once it holds more than
// MaxLinePending bytes of one line it writes those, and it writes a last
// line with no newline at Close: each such piece is ended with a newline
// the stream did not write, so that the next line in the log, perhaps
// another exec's, starts on a line of its own. The lines one Write
// completes go out together, split only past MaxChunk.
type LineWriter struct {
	mu      sync.Mutex
	log     *Log
	pending []byte // a line begun, without its newline
	closed  bool
}

// Line returns a LineWriter for one stream (an exec's stdout, say). It
// must be closed, to write what it holds.
func (l *Log) Line() *LineWriter {
	return &LineWriter{log: l}
}

// Write appends the lines p completes; what follows its last newline is
// held for the next Write.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errors.New("sandbox log: write after close")
	}
	n := len(p)
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		lines := p[:i+1]
		if len(w.pending) > 0 {
			lines = append(w.pending, lines...)
			w.pending = w.pending[:0]
		}
		if _, err := w.log.Write(lines); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	w.pending = append(w.pending, p...)
	for len(w.pending) > MaxLinePending {
		piece := append(w.pending[:MaxLinePending:MaxLinePending], '\n')
		if _, err := w.log.Write(piece); err != nil {
			return 0, err
		}
		w.pending = append(w.pending[:0], w.pending[MaxLinePending:]...)
	}
	return n, nil
}

// Close writes the line the stream left unfinished, ended with a newline.
// It does not close the Log.
func (w *LineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if len(w.pending) == 0 {
		return nil
	}
	_, err := w.log.Write(append(w.pending, '\n'))
	w.pending = nil
	return err
}

// Tail returns the last n lines the log in dir keeps, across log.1 and
// log (n <= 0: all of them); nothing when there is no log.
func Tail(dir *os.File, n int) ([]byte, error) {
	old, cur, err := appendlog.OpenKept(dir, Name)
	if err != nil {
		return nil, fmt.Errorf("sandbox log: %w", err)
	}
	var data []byte
	for _, f := range []*os.File{old, cur} {
		if f == nil {
			continue
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("sandbox log: %s: %w", f.Name(), err)
		}
		data = append(data, b...)
	}
	return lastLines(data, n), nil
}

// lastLines returns the last n lines of data (a last line without its
// newline counts as one); all of data when n <= 0.
func lastLines(data []byte, n int) []byte {
	if n <= 0 {
		return data
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}
