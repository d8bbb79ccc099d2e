//go:build jail_server

package programs

import "embed"

// embedded holds only the gateway program in the server program's own
// build (tag jail_server): it cannot embed itself, it starts its
// sandboxes from the helper program, which every build embeds, and their
// egress gateways from this (generate.sh builds the gateway first). Of
// the tools program it holds the version: jail hands the program itself
// over (ExecServer), and the version keys what is cached of its work.
//
//go:embed bin/gateway bin/gateway.sha256 bin/tools.sha256
var embedded embed.FS
