//go:build !jail_noprograms && !jail_server

package programs

import "embed"

// embedded holds bin/NAME and bin/NAME.sha256 for each program the build
// generated.
//
//go:embed all:bin
var embedded embed.FS
