//go:build jail_tools && !jail_noprograms

package programs

import "embed"

// embedded holds only the stage program in the tools program's own build
// (tag jail_tools): the server it runs starts sandboxes from it, and it
// cannot embed itself.
//
//go:embed bin/stage bin/stage.sha256
var embedded embed.FS
