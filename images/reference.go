package images

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Reference syntax, as go-containerregistry's name package accepts it with
// its default (weak) validation. jail keys its store by that package's
// canonical names, and images/fetch still parses with it; the run path
// normalises here instead because linking it (and go-digest, which compiles
// regular expressions at start-up) cost every jail process 0.35 ms. A
// differential test and a fuzz target hold the two to the same answers.
const (
	defaultRegistry      = "index.docker.io"
	defaultRegistryAlias = "docker.io"
	defaultNamespace     = "library"
	defaultTag           = "latest"
	repositoryChars      = "abcdefghijklmnopqrstuvwxyz0123456789_-./"
	tagChars             = "abcdefghijklmnopqrstuvwxyz0123456789_-.ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// digestSizes are the hex lengths of the digest algorithms accepted.
var digestSizes = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}

// Normalize makes a reference canonical, as Docker does: "busybox" is
// index.docker.io/library/busybox:latest, and a digest reference keeps its
// digest and drops any tag.
func Normalize(ref string) (string, error) {
	if n, ok := normalize(ref); ok {
		return n, nil
	}
	return "", fmt.Errorf("%q is not an image reference", ref)
}

func normalize(ref string) (string, bool) {
	if strings.HasPrefix(ref, "http://") || strings.HasPrefix(ref, "https://") {
		return "", false
	}
	if repo, tag, ok := parseTagged(ref); ok {
		return repo + ":" + tag, true
	}
	return parseDigested(ref)
}

// parseTagged reads REPOSITORY[:TAG]: the tag is what follows the last ':'
// unless that holds a '/' (then the ':' was a registry's port).
func parseTagged(ref string) (repo, tag string, ok bool) {
	base := ref
	if i := strings.LastIndexByte(ref, ':'); i >= 0 && !strings.Contains(ref[i+1:], "/") {
		base, tag = ref[:i], ref[i+1:]
		if !validElement(tag, tagChars, 1, 128) {
			return "", "", false
		}
	}
	if tag == "" {
		tag = defaultTag
	}
	repo, ok = parseRepository(base)
	return repo, tag, ok
}

// parseDigested reads REPOSITORY[:TAG]@DIGEST.
func parseDigested(ref string) (string, bool) {
	base, digest, found := strings.Cut(ref, "@")
	if !found || strings.Contains(digest, "@") || !validDigest(digest) {
		return "", false
	}
	if repo, _, ok := parseTagged(base); ok {
		base = repo
	}
	repo, ok := parseRepository(base)
	if !ok {
		return "", false
	}
	return repo + "@" + digest, true
}

// parseRepository returns REGISTRY/REPOSITORY in canonical form. The first
// component is a registry when it is localhost or holds a '.' or ':'.
func parseRepository(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	registry, repo := "", name
	if first, rest, found := strings.Cut(name, "/"); found && (first == "localhost" || strings.ContainsAny(first, ".:")) {
		registry, repo = first, rest
	}
	if !validElement(repo, repositoryChars, 1, 255) {
		return "", false
	}
	if u, err := url.Parse("//" + registry); err != nil || u.Host != registry {
		return "", false
	}
	if registry == "" || registry == defaultRegistryAlias {
		registry = defaultRegistry
	}
	if registry == defaultRegistry && !strings.Contains(repo, "/") {
		repo = defaultNamespace + "/" + repo
	}
	return registry + "/" + repo, true
}

// validElement: between min and max runes, each one of allowed.
func validElement(s, allowed string, min, max int) bool {
	if n := utf8.RuneCountInString(s); n < min || n > max {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune(allowed, r) {
			return false
		}
	}
	return true
}

// validDigest: ALGORITHM:HEX with a known algorithm and lower-case hex of
// its length.
func validDigest(d string) bool {
	alg, hex, found := strings.Cut(d, ":")
	size, known := digestSizes[alg]
	if !found || !known || len(hex) != size {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
