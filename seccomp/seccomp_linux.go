// Package seccomp finds a profile as resolved and its compiled seccomp
// filter: built-in profiles come resolved and compiled at build time, and
// user profiles are resolved and compiled on first use (by packages
// profiles/files and compile, run in jail's tools program) and cached,
// keyed by a hash of the user's profile files, the name, the architecture
// and the tools program. A sandbox's init only loads raw BPF (package
// filter), which takes well under a millisecond. This package has no cgo
// and reads no YAML.
package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// cacheVersion changes whenever what is cached for the same input would
// change, invalidating cached entries.
const cacheVersion = 5

// Filter is a compiled policy (see package filter, which loads it).
type Filter = filter.Filter

// Resolver resolves and compiles a user profile from the user's profile
// files; Identity names it (and the libseccomp it uses) for cache keys.
type Resolver struct {
	Identity string
	Resolve  func(user profiles.Files, name string) (*profiles.Profile, Filter, error)
}

// Resolved is a profile as resolved with its filter: what is cached, and
// the tools program's answer to a ResolveRequest.
type Resolved struct {
	Profile *profiles.Profile `json:"profile"`
	Filter  Filter            `json:"filter"`
}

// ResolveRequest asks the tools program for profile Name resolved from the
// user's Files.
type ResolveRequest struct {
	Name  string         `json:"name"`
	Files profiles.Files `json:"files"`
}

// ResolveError is the tools program's answer when resolving or compiling
// fails: a profile error keeps its profile and line.
type ResolveError struct {
	Profile string `json:"profile,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// Key identifies what resolving name from the user's files gives: the
// files (all of them: which ones a profile extends is known only once
// they are parsed), the name, the architecture and the resolver.
func Key(user profiles.Files, name, resolver string) (string, error) {
	files, err := json.Marshal(user)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "jail-profile %d\n%s\n%s\n%s\n", cacheVersion, runtime.GOARCH, resolver, name)
	h.Write(files)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CacheDir is where compiled filters are kept: /var/cache/jail/seccomp for
// root, ~/.cache/jail/seccomp for others, with the home of the caller's
// uid in the password database (asked of users; nil reads it): never a
// directory the environment names, so that the directory jail keeps from
// sandboxes is the same whatever the environment (a cron job, a CI step).
// "" when the caller has no home.
func CacheDir(users *privdir.Passwd) string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/var/cache/jail/seccomp"
	}
	if home, err := users.HomeOf(uid); err == nil {
		return filepath.Join(home, ".cache", "jail", "seccomp")
	}
	return ""
}

// maxEntry bounds a cached entry.
const maxEntry = 16 << 20

// Cached returns profile name resolved from the user's files, with its
// filter: from the cache in dir (CacheDir; "" for none), or resolved,
// compiled and stored the first time. A cache that cannot be written only
// costs the resolving. An entry is trusted as the caller's own only in a
// directory private to the caller (package privdir), and only when it is
// a regular file of the caller's that group and others cannot write: a
// cache that anyone else could have written is not used at all.
func Cached(dir string, user profiles.Files, name string, r Resolver) (*profiles.Profile, Filter, error) {
	key, err := Key(user, name, r.Identity)
	if err != nil {
		return nil, Filter{}, err
	}
	entry := "profile-" + key + ".json"
	cache := OpenCache(dir)
	defer cache.Close()
	if data, ok := cache.Read(entry, maxEntry); ok {
		var c Resolved
		if json.Unmarshal(data, &c) == nil && c.Profile != nil && c.Filter.Valid() {
			return c.Profile, c.Filter, nil
		}
	}
	p, f, err := r.Resolve(user, name)
	if err != nil {
		return nil, Filter{}, err
	}
	if data, err := json.Marshal(Resolved{Profile: p, Filter: f}); err == nil {
		cache.Write(entry, data)
	}
	return p, f, nil
}

// Cache is a directory of compiled filters private to the caller (see
// Cached for what is trusted); a nil Cache keeps nothing.
type Cache struct {
	dir *os.File // O_PATH
	uid int
}

// OpenCache opens dir (CacheDir), made 0700 if missing; nil when dir is
// "" or not private to the caller, which then only costs compiling.
func OpenCache(dir string) *Cache {
	if dir == "" {
		return nil
	}
	uid := os.Geteuid()
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		_ = os.MkdirAll(dir, 0o700)
	}
	f, err := privdir.Open(dir, uid, unix.O_PATH)
	if err != nil {
		return nil
	}
	return &Cache{dir: f, uid: uid}
}

// Read returns entry when it is a regular file of the caller's that
// group and others cannot write, of at most max bytes.
func (c *Cache) Read(entry string, max int64) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	data, err := privdir.ReadFile(c.dir, entry, max, c.uid)
	return data, err == nil
}

// Write replaces entry with data (a new file renamed into place); a cache
// that cannot be written is left as it is.
func (c *Cache) Write(entry string, data []byte) {
	if c != nil {
		_ = privdir.WriteFile(int(c.dir.Fd()), entry, ".tmp-", data, 0o644)
	}
}

// Close closes the directory.
func (c *Cache) Close() {
	if c != nil {
		c.dir.Close()
	}
}
