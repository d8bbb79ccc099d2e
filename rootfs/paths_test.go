package rootfs

import "testing"

func TestCheckMountSource(t *testing.T) {
	cases := []struct {
		path string
		ok   bool
	}{
		{"/srv/project", true}, {"/home/u/project", true}, {"/opt", true},
		{"/", false}, {"/proc", false}, {"/proc/1/root", false}, {"/sys/kernel", false}, {"/dev", false},
		{"/etc/shadow", false}, {"/etc", false}, {"/var/run/docker.sock", false}, {"/run/docker.sock", false},
		{"/home/u/.ssh", false}, {"/home/u/.ssh/id_ed25519", false}, {"/home/other/.aws", false},
		{"/root/.gnupg", false}, {"/home/u", false}, {"/root", false}, {"/boot", false},
	}
	for _, c := range cases {
		if err := CheckMountSource(c.path, "/home/u"); (err == nil) != c.ok {
			t.Errorf("CheckMountSource(%q) = %v; want ok=%v", c.path, err, c.ok)
		}
	}
}

func TestCheckDestination(t *testing.T) {
	cases := []struct {
		path string
		ok   bool
	}{
		{"/data", true}, {"/usr/share/x", true}, {"/workspace", true},
		{"data", false}, {"/", false}, {"/a/../b", false}, {"../x", false},
		{"/proc/x", false}, {"/sys", false}, {"/dev/shm", false},
	}
	for _, c := range cases {
		if err := CheckDestination(c.path); (err == nil) != c.ok {
			t.Errorf("CheckDestination(%q) = %v; want ok=%v", c.path, err, c.ok)
		}
	}
}

// TestCheckMountSourceJailDirs: jail's own directories, and any directory
// holding them, are refused whether they exist yet or not; what sits beside
// them is not.
func TestCheckMountSourceJailDirs(t *testing.T) {
	own := "/nonexistent/u/.cache/jail"
	for path, ok := range map[string]bool{
		own: false, own + "/seccomp": false, "/nonexistent/u/.cache": false, "/nonexistent": false,
		"/nonexistent/u/.cache/other": true,
	} {
		if err := CheckMountSource(path, "/home/u", own); (err == nil) != ok {
			t.Errorf("CheckMountSource(%q) = %v; want ok=%v", path, err, ok)
		}
	}
}
