//go:build !amd64 && !arm64

package programs

// The helper program (a sandbox's init, in C) is committed for amd64 and
// arm64 only. For another GOARCH, add its cross compiler to helper/build.sh,
// build and commit helper/jail-helper-GOARCH with its .sha256 (make helper),
// and embed them as helper_amd64.go does; until then the build stops here.
var (
	helperBinary = noHelperProgramForThisGOARCH_SeeHelperBuildSh
	helperSHA256 = noHelperProgramForThisGOARCH_SeeHelperBuildSh
)
