package jail

import (
	"os"
	"testing"
)

// TestInitWithoutArgs: a process without arguments (os.Args emptied by its
// program, or an exec with no argv on a kernel that gives none) is no
// helper of jail's: Init returns and Run's guard lets it be, rather than
// panicking on os.Args[0].
func TestInitWithoutArgs(t *testing.T) {
	saved := os.Args
	defer func() { os.Args = saved }()
	os.Args = nil
	Init()
	if err := startedWithoutInit(); err != nil {
		t.Errorf("startedWithoutInit with no arguments: %v", err)
	}
}
