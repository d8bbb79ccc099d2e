package programs

import _ "embed"

// The helper program built for arm64 (helper/build.sh), committed.
var (
	//go:embed helper/jail-helper-arm64
	helperBinary string
	//go:embed helper/jail-helper-arm64.sha256
	helperSHA256 string
)
