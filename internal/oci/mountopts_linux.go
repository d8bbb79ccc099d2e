package oci

import (
	"fmt"
	"strings"
)

// mountOptions are a mount's options as mount(2) takes them.
type mountOptions struct {
	// Flags are MS_* flags; Propagation the MS_* propagation flags
	// applied after the mount, in the order given (the last one wins,
	// as with runc, which applies them in turn).
	Flags       uint64
	Propagation uint64
	// Data is the filesystem's own options, comma-separated.
	Data string
}

// parseMountOptions reads a mount's options as runc does: flags set or
// cleared in order, propagation options, and the rest as the filesystem's
// data. Options jail does not realise yet are refused rather than handed
// to the filesystem, which would ignore some of them.
func parseMountOptions(options []string) (mountOptions, error) {
	var out mountOptions
	var data []string
	flags, propagations, unsupported := mountFlags(), propagationFlags(), unsupportedMountOptions()
	for _, o := range options {
		if f, ok := flags[o]; ok {
			if f.clear {
				out.Flags &^= f.flag
			} else {
				out.Flags |= f.flag
			}
			continue
		}
		if p, ok := propagations[o]; ok {
			out.Propagation = p
			continue
		}
		if unsupported[o] {
			return mountOptions{}, fmt.Errorf("option %q is not supported", o)
		}
		if o == "" || strings.ContainsRune(o, 0) {
			return mountOptions{}, fmt.Errorf("option %q is malformed", o)
		}
		data = append(data, o)
	}
	out.Data = strings.Join(data, ",")
	return out, nil
}
