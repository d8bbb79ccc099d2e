package programs

import _ "embed"

// The helper program built for amd64 (helper/build.sh), committed.
var (
	//go:embed helper/jail-helper-amd64
	helperBinary string
	//go:embed helper/jail-helper-amd64.sha256
	helperSHA256 string
)
