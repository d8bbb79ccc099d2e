// Package seccomp will compile profiles to BPF once, cache the result, and
// load it in the init as the last step before exec (issue 4).
package seccomp
