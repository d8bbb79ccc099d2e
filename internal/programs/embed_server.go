//go:build jail_server

package programs

import "embed"

// embedded is empty in the server program's own build (tag jail_server):
// it cannot embed itself, and it starts its sandboxes from the helper
// program, which every build embeds.
var embedded embed.FS
