package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// MaxConfig bounds a bundle's config.json: a real one is a few KiB (a
// large seccomp profile some tens).
const MaxConfig = 4 << 20

// Bundle is a bundle as read: its directory, held open, and its spec.
type Bundle struct {
	// Path is the bundle's absolute path as given (the state's "bundle").
	Path string
	// Dir is the bundle's directory (O_PATH), through which its relative
	// paths are opened.
	Dir  *os.File
	Spec *specs.Spec
}

// Close releases the bundle's directory.
func (b *Bundle) Close() error {
	if b == nil || b.Dir == nil {
		return nil
	}
	return b.Dir.Close()
}

// LoadBundle opens the bundle directory path once and reads its
// config.json through that descriptor.
func LoadBundle(path string) (*Bundle, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("oci: bundle %q: %w", path, err)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("oci: bundle %s: %w", abs, err)
	}
	dir := os.NewFile(uintptr(fd), abs)
	spec, err := readConfig(dir)
	if err != nil {
		dir.Close()
		return nil, err
	}
	return &Bundle{Path: abs, Dir: dir, Spec: spec}, nil
}

// readConfig reads and decodes config.json in dir: a regular file (a FIFO
// or a device in its place must not block or feed the read), at most
// MaxConfig bytes.
func readConfig(dir *os.File) (*specs.Spec, error) {
	fd, err := unix.Openat(int(dir.Fd()), "config.json", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("oci: config.json: %w", err)
	}
	f := os.NewFile(uintptr(fd), "config.json")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("oci: config.json: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("oci: config.json: not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConfig+1))
	if err != nil {
		return nil, fmt.Errorf("oci: config.json: %w", err)
	}
	if len(data) > MaxConfig {
		return nil, fmt.Errorf("oci: config.json: larger than %d bytes", MaxConfig)
	}
	return DecodeConfig(data)
}

// DecodeConfig decodes a config.json: one JSON object, unknown properties
// ignored (the spec asks for it), nothing after it.
func DecodeConfig(data []byte) (*specs.Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var spec specs.Spec
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("oci: config.json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("oci: config.json: more than one JSON value")
	}
	return &spec, nil
}
