package programs

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStartPathLinksNothingHeavy: the jail binary, which every `jail run`
// starts, links none of the packages kept in the tools and server
// programs. Each costs every start
// its package initialisation or a dynamic loader: YAML (a regexp and
// Unicode tables, 0.3-0.4 ms), net/http (0.6 ms), go-containerregistry
// and libseccomp (which would also bring cgo and a dynamic loader), and
// cilium/ebpf (`jail oci`'s cgroup v2 device programs, 0.13-0.17 ms and
// 1.8 MB).
func TestStartPathLinksNothingHeavy(t *testing.T) {
	heavy := []string{
		"gopkg.in/yaml.v3", "regexp", "net/http",
		"github.com/google/go-containerregistry/", "github.com/seccomp/libseccomp-golang",
		"github.com/cilium/",
	}
	for _, pkg := range []string{"github.com/jail-sandbox/jail/cmd/jail"} {
		// As make builds them: without cgo (with it, net links it).
		list := exec.Command("go", "list", "-deps", pkg)
		list.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := list.Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, h := range heavy {
				if dep == h || (strings.HasSuffix(h, "/") && strings.HasPrefix(dep, h)) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}
