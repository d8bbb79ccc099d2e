//go:build jail_server && !jail_noprograms

package programs

import "embed"

// embedded holds only the stage program in the server program's own build
// (tag jail_server): the server starts its sandboxes from it, and cannot
// embed itself.
//
//go:embed bin/stage bin/stage.sha256
var embedded embed.FS
