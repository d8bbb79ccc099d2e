//go:build jail_server && !jail_noprograms

package programs

import "embed"

// embedded holds only the stage and init programs in the server program's
// own build (tag jail_server): the server starts its sandboxes from them,
// and cannot embed itself.
//
//go:embed bin/stage bin/stage.sha256 bin/init bin/init.sha256
var embedded embed.FS
