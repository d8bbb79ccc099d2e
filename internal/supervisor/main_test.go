package supervisor

import (
	"os"
	"testing"

	"github.com/jail-sandbox/jail/internal/stage"
)

// TestMain runs the stages this test binary is re-executed as (a pool's
// forker and janitor start from the running binary where there is no
// stage program, as jail.Init does for an embedding program). Without it,
// a re-executed test binary would run the tests again, each starting pools
// that re-execute it once more.
func TestMain(m *testing.M) {
	stage.Main()
	os.Exit(m.Run())
}
