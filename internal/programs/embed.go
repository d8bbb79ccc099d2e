//go:build !jail_server

package programs

import "embed"

// embedded holds bin/NAME and bin/NAME.sha256 for the tools and server
// programs, when go generate built them (bin/README.md alone otherwise).
//
//go:embed all:bin
var embedded embed.FS
