package fetch

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/images"
)

// TestOwnerOnDisk: how a tar entry's owner becomes its owner on disk in each
// of the store's three ways (images.Ownership), and what becomes of an owner
// the sandboxes have no id for.
func TestOwnerOnDisk(t *testing.T) {
	root := images.Ownership{Shift: true, Base: 2000000000, Size: 65536}
	sub := images.Ownership{SubIDs: &images.IDMapping{UID: 100000, GID: 200000, Size: 65535}}
	small := images.Ownership{SubIDs: &images.IDMapping{UID: 100000, GID: 200000, Size: 1000}}
	for _, c := range []struct {
		what     string
		own      images.Ownership
		uid, gid int
		wantUID  int
		wantGID  int
		err      string
	}{
		{"rootless, one id: the caller's", images.Ownership{}, 1000, 1000, 0, 0, ""},
		{"root's store: shifted", root, 1000, 50, 2000001000, 2000000050, ""},
		{"root's store: above the range is nobody", root, 70000, 0, 2000065534, 2000000000, ""},
		{"subordinate ids: kept", sub, 1000, 50, 1000, 50, ""},
		{"subordinate ids: the last one", sub, 65535, 65535, 65535, 65535, ""},
		{"subordinate ids: above the range is nobody", sub, 70000, 4294967294, images.Nobody, images.Nobody, ""},
		{"a small range: kept below it", small, 999, 1000, 999, 1000, ""},
		{"a small range cannot hold nobody: refused", small, 1001, 0, 0, 0, "too small to hold nobody"},
		{"a small range, group above it: refused", small, 0, 5000, 0, 0, "owner 0:5000"},
	} {
		uid, gid, err := owner(&tar.Header{Uid: c.uid, Gid: c.gid}, c.own)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %d:%d, %v; want an error with %q", c.what, uid, gid, err, c.err)
			}
			continue
		}
		if err != nil || uid != c.wantUID || gid != c.wantGID {
			t.Errorf("%s: %d:%d, %v; want %d:%d", c.what, uid, gid, err, c.wantUID, c.wantGID)
		}
	}
}
