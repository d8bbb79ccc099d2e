package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// CompileSeccompInTools compiles a bundle's seccomp policy in jail's tools
// program (`jail-tools oci seccomp`), which links libseccomp: the jail
// binary does not.
func CompileSeccompInTools(s *specs.LinuxSeccomp) (filter.Filter, error) {
	in, err := json.Marshal(s)
	if err != nil {
		return filter.Filter{}, err
	}
	var out, stderr bytes.Buffer
	code, err := programs.RunTools([]string{"oci", "seccomp"}, bytes.NewReader(in), &out, &stderr)
	if err != nil {
		return filter.Filter{}, err
	}
	if code != 0 {
		var re seccomp.ResolveError
		if json.Unmarshal(out.Bytes(), &re) != nil || re.Message == "" {
			return filter.Filter{}, fmt.Errorf("tools program: oci seccomp: status %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
		}
		return filter.Filter{}, errors.New(re.Message)
	}
	var f filter.Filter
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || !f.Valid() {
		return filter.Filter{}, errors.New("tools program: oci seccomp: not a compiled filter")
	}
	return f, nil
}
