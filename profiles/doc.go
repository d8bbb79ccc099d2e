// Package profiles will hold the named policies (seccomp rules, limits,
// masks, network mode) that users choose with --profile (issue 4). Only the
// name "default" is accepted until then.
package profiles
