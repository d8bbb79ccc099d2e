//go:build jail_noprograms

package programs

import "embed"

// embedded is empty in a build tagged jail_noprograms: the build that the
// tests use to check what a build without the helper programs does (the
// init re-executes the running binary; no tools).
var embedded embed.FS
