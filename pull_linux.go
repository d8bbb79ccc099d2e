//go:build linux

package jail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/supervisor"
	"github.com/jail-sandbox/jail/namespaces"
)

// preparePulling is prepare, with spec's image pulled as spec.Pull says:
// before it (PullAlways), or once prepare has found it missing from the
// store (PullMissing), which costs a run whose image is there nothing. A
// spec validate refuses is never pulled for.
func preparePulling(spec *Spec) (*supervisor.Plan, error) {
	if spec.Image == "" || spec.Pull == PullNever {
		return prepare(spec)
	}
	if spec.Pull == PullAlways {
		if err := validate(spec); err != nil {
			return prepare(spec) // refuses it, as Refused
		}
		if err := pullImage(spec.Image, spec.PullProgress); err != nil {
			return nil, err
		}
		return prepare(spec)
	}
	p, err := prepare(spec)
	if err == nil || !errors.Is(err, images.ErrNotStored) {
		return p, err
	}
	// prepare found no image, and changed nothing in spec.
	if err := pullImage(spec.Image, spec.PullProgress); err != nil {
		return nil, err
	}
	return prepare(spec)
}

// pullForCreate pulls a persistent sandbox's image as spec.Pull says, in
// the creating process: its holder only looks it up, as every later
// start does. spec is valid.
func pullForCreate(spec *Spec) error {
	switch {
	case spec.Image == "" || spec.Pull == PullNever:
		return nil
	case spec.Pull != PullAlways:
		// Any other failure to read the image is the holder's to report.
		if _, err := ImageStore().Lookup(spec.Image); !errors.Is(err, images.ErrNotStored) {
			return nil
		}
	}
	return pullImage(spec.Image, spec.PullProgress)
}

// maxPullError bounds what is kept of the tools program's stderr.
const maxPullError = 8 << 10

// pullImage is `jail image pull ref`: the tools program fetches ref into
// the caller's store (for a rootless caller with subordinate ids, in a
// user namespace mapped with them, as the store's layers need), with
// progress lines on progress (none when nil). Its failure is a Refused
// SetupError naming ref, in one line: the tools program's own.
func pullImage(ref string, progress io.Writer) error {
	fail := func(err error) error {
		return &SetupError{Step: "image " + ref, Err: err, Refused: true}
	}
	// The canonical name never starts with '-': no reference is taken
	// for the tools program's options.
	name, err := images.Normalize(ref)
	if err != nil {
		return fail(err)
	}
	args := []string{"image", "pull", name, "--quiet"}
	if progress != nil {
		args = append(args, "--progress")
	}
	stderr := &boundedBuffer{max: maxPullError}
	var code int
	if id, mapped := storeIdentity(); mapped {
		code, err = programs.RunToolsMapped(id, args, nil, progress, stderr)
	} else {
		code, err = programs.RunTools(args, nil, progress, stderr)
	}
	if err != nil {
		return fail(fmt.Errorf("cannot pull it: %w", err))
	}
	if code != 0 {
		if progress != nil {
			// A layer's progress line may be left unfinished.
			io.WriteString(progress, "\r\033[K")
		}
		return fail(fmt.Errorf("cannot pull it: %s", toolsReason(stderr.Bytes(), name, code)))
	}
	return nil
}

// storeIdentity is the identity under which the caller's image store is
// changed: a rootless caller's with subordinate ids, whose layers are
// stored with their owners among those ids (as `jail image pull` does).
func storeIdentity() (namespaces.Identity, bool) {
	if os.Geteuid() == 0 {
		return namespaces.Identity{}, false
	}
	id, err := namespaces.ForCaller(nil, 0, 0)
	return id, err == nil && id.SubIDs
}

// toolsReason is why the tools program's pull of name failed: the last
// line it wrote ("jail: image pull NAME: pull: ..."), without what the
// caller's error says already.
func toolsReason(stderr []byte, name string, code int) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return fmt.Sprintf("the tools program ended with status %d", code)
	}
	last = strings.TrimPrefix(last, "jail: ")
	last = strings.TrimPrefix(last, "image pull "+name+": ")
	return strings.TrimPrefix(last, "pull: ")
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
