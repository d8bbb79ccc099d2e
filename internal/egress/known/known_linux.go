// Package known remembers, per user, the --net allow= rule lists that the
// gateway program parsed and accepted, so that a later sandbox with the
// same list need not wait for the gateway before its command starts: its
// gateway can then start on the sandbox's first connection or query
// rather than with every run (docs/egress.md).
//
// Invariants:
//   - An entry is trusted only in a directory private to the caller and
//     only as a regular file of the caller's that group and others cannot
//     write (package privdir), as the seccomp cache's; anything else is as
//     if there were no entry, and costs only the wait.
//   - An entry names the rules by their SHA-256 with the gateway
//     program's version: another version parses anew.
//   - Trusting a wrong entry (one the caller's own processes planted)
//     gains nothing: the gateway parses the rules again when it starts,
//     and refuses them then, and the sandbox is ended.
package known

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

// Dir is where the caller's entries are: below jail's cache directory of
// the caller's (cacheDir's parent: seccomp.CacheDir), "" for none.
func Dir(seccompCache string) string {
	if seccompCache == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(seccompCache), "egress")
}

func entry(rules, version string) string {
	sum := sha256.Sum256([]byte(version + "\x00" + rules))
	return "rules-" + hex.EncodeToString(sum[:16])
}

// Accepted reports whether rules were accepted by the gateway of version
// before.
func Accepted(dir, rules, version string) bool {
	if dir == "" || version == "" {
		return false
	}
	uid := os.Geteuid()
	d, err := privdir.Open(dir, uid, unix.O_PATH)
	if err != nil {
		return false
	}
	defer d.Close()
	data, err := privdir.ReadFile(d, entry(rules, version), int64(len(rules)+1), uid)
	return err == nil && string(data) == rules
}

// Remember records that the gateway of version accepted rules; a cache
// that cannot be written only costs the next sandbox the wait.
func Remember(dir, rules, version string) {
	if dir == "" || version == "" {
		return
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		_ = os.MkdirAll(dir, 0o700)
	}
	d, err := privdir.Open(dir, os.Geteuid(), unix.O_PATH)
	if err != nil {
		return
	}
	defer d.Close()
	_ = privdir.WriteFile(int(d.Fd()), entry(rules, version), ".tmp-", []byte(rules), 0o600)
}
