package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jail-sandbox/jail/internal/egress/protocol"
)

// TestGatewayGetsOnlyItsEnvironment: the gateway holds nothing of jail's
// environment but what its resolver and certificate roots read, also when
// none of those is set (os/exec, which started it before, gave a nil
// environment the caller's whole: a proxy setting or a secret in it
// reached the gateway).
func TestGatewayGetsOnlyItsEnvironment(t *testing.T) {
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "RES_OPTIONS", "LOCALDOMAIN", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Setenv(k, v) // restored after the test
			os.Unsetenv(k)
		}
	}
	t.Setenv("JAIL_TEST_CALLERS_SECRET", "not for the gateway")
	g, err := Start(protocol.Config{Rules: "example.test"}, nil)
	if err != nil {
		t.Skipf("no gateway program here: %v", err)
	}
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(g.pid), "environ"))
	g.kill()
	if err != nil {
		t.Fatal(err)
	}
	if len(environ) != 0 {
		t.Errorf("the gateway's environment: %q; want none", bytes.Split(environ, []byte{0}))
	}
}
