package namespaces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

// subRange is a range of subordinate ids.
type subRange struct{ start, size int }

// subIDs are the caller's subordinate uids and gids.
type subIDs struct{ uids, gids subRange }

// Files and helpers of subordinate ids (shadow's, Debian's uidmap package).
const (
	subUIDFile = "/etc/subuid"
	subGIDFile = "/etc/subgid"
)

var mapHelpers = [2]string{"newuidmap", "newgidmap"}

// callerSubIDs returns the caller's first subordinate ranges of uids and
// gids, when both exist, are large enough to matter, and the helpers that
// map them are installed. users is asked for the caller's name (nil: the
// password database is read).
func callerSubIDs(users *privdir.Passwd) (subIDs, bool) {
	if os.Geteuid() == 0 {
		return subIDs{}, false
	}
	for _, h := range mapHelpers {
		if _, err := exec.LookPath(h); err != nil {
			return subIDs{}, false
		}
	}
	name := ""
	if a, err := users.Lookup(os.Geteuid()); err == nil {
		name = a.Name
	}
	uids, ok1 := subordinate(subUIDFile, name, os.Geteuid())
	gids, ok2 := subordinate(subGIDFile, name, os.Geteuid())
	if !ok1 || !ok2 {
		return subIDs{}, false
	}
	return subIDs{uids, gids}, true
}

// SubIDsDetail says whether the caller gets subordinate ids, and why not,
// for jail check.
func SubIDsDetail() string {
	if os.Geteuid() == 0 {
		return ""
	}
	if sub, ok := callerSubIDs(nil); ok {
		n := min(sub.uids.size, sub.gids.size, HostRangeSize-1)
		return fmt.Sprintf("sandbox ids 1-%d map to your subordinate uids %d-%d and gids %d-%d (newuidmap, newgidmap)",
			n, sub.uids.start, sub.uids.start+n-1, sub.gids.start, sub.gids.start+n-1)
	}
	for _, h := range mapHelpers {
		if _, err := exec.LookPath(h); err != nil {
			return "only your own id is mapped: " + h + " is not installed (Debian: apt-get install uidmap)"
		}
	}
	return "only your own id is mapped: you have no range in " + subUIDFile + " and " + subGIDFile
}

// subordinate finds the first range of user name (or uid) in file, which
// has lines "name-or-uid:start:count".
func subordinate(file, name string, uid int) (subRange, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return subRange{}, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 || (f[0] != name && f[0] != strconv.Itoa(uid)) {
			continue
		}
		start, err1 := strconv.Atoi(f[1])
		size, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || start <= 0 || size < 1 || start > 1<<31 {
			continue
		}
		return subRange{start, size}, true
	}
	return subRange{}, false
}

// mapWithHelpers writes the maps of pid's user namespace with newuidmap and
// newgidmap, both at once (each is a process start).
func mapWithHelpers(pid int, uids, gids []syscall.SysProcIDMap) error {
	errs := make(chan error, 2)
	for i, m := range [][]syscall.SysProcIDMap{uids, gids} {
		args := []string{strconv.Itoa(pid)}
		for _, e := range m {
			args = append(args, strconv.Itoa(e.ContainerID), strconv.Itoa(e.HostID), strconv.Itoa(e.Size))
		}
		cmd := exec.Command(mapHelpers[i], args...)
		cmd.Env = []string{}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			errs <- fmt.Errorf("%s: %w", mapHelpers[i], err)
			continue
		}
		go func(name string) {
			if err := cmd.Wait(); err != nil {
				errs <- fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
				return
			}
			errs <- nil
		}(mapHelpers[i])
	}
	return errors.Join(<-errs, <-errs)
}

// SubIDMapping is the part of a rootless identity's maps that subordinate
// ids take: sandbox ids 1..Size onto host uids UID.. and gids GID.. (sandbox
// id 0 being the caller).
type SubIDMapping struct{ UID, GID, Size int }

// SubIDMapping returns that part of id's maps, when id maps subordinate ids.
func (id Identity) SubIDMapping() (SubIDMapping, bool) {
	if !id.SubIDs || len(id.UIDMap) != 2 || len(id.GIDMap) != 2 ||
		id.UIDMap[1].ContainerID != 1 || id.GIDMap[1].ContainerID != 1 {
		return SubIDMapping{}, false
	}
	return SubIDMapping{UID: id.UIDMap[1].HostID, GID: id.GIDMap[1].HostID, Size: min(id.UIDMap[1].Size, id.GIDMap[1].Size)}, true
}

// UserNSAttr returns the attributes of a process started in a user
// namespace of its own and no other namespace (it shares the caller's
// files, mounts and network), with its ids unmapped until its starter calls
// an Identity's MapIDs. Its capabilities in that namespace are caps, raised to its
// ambient set so that they survive the exec of an unmapped process; once
// mapped it is the namespace's root, with those capabilities over files
// whose owners the maps name and no others. It dies with its starter's
// thread.
func UserNSAttr(caps []uintptr) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		AmbientCaps: caps,
		Pdeathsig:   syscall.SIGKILL,
	}
}

// OwnSubIDMapping reads the maps of the calling process's user namespace
// and returns their subordinate part when they are what ForCaller maps for
// a rootless caller with subordinate ids (0 onto one id, 1..N onto a
// range, for both uids and gids) and the caller is that namespace's root:
// how a process started with UserNSAttr learns, once mapped, what it may
// chown files to.
func OwnSubIDMapping() (SubIDMapping, error) {
	var m SubIDMapping
	var sizes [2]int
	for i, file := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
		data, err := os.ReadFile(file)
		if err != nil {
			return SubIDMapping{}, fmt.Errorf("user namespace: %w", err)
		}
		host, size, ok := parseSubIDMap(string(data))
		if !ok {
			return SubIDMapping{}, fmt.Errorf("user namespace: %s is not sandbox root onto one id and 1..N onto subordinate ids: %q", file, data)
		}
		if i == 0 {
			m.UID = host
		} else {
			m.GID = host
		}
		sizes[i] = size
	}
	if os.Geteuid() != 0 || os.Getegid() != 0 {
		return SubIDMapping{}, fmt.Errorf("user namespace: not its root (uid %d, gid %d)", os.Geteuid(), os.Getegid())
	}
	m.Size = min(sizes[0], sizes[1])
	return m, nil
}

// parseSubIDMap parses a uid_map or gid_map of exactly two lines, "0 H 1"
// and "1 S N", and returns S and N.
func parseSubIDMap(text string) (start, size int, ok bool) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 {
		return 0, 0, false
	}
	var e [2][3]int
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			return 0, 0, false
		}
		for j := range f {
			n, err := strconv.Atoi(f[j])
			if err != nil || n < 0 {
				return 0, 0, false
			}
			e[i][j] = n
		}
	}
	if e[0][0] != 0 || e[0][2] != 1 || e[1][0] != 1 || e[1][2] < 1 || e[1][2] > HostRangeSize-1 {
		return 0, 0, false
	}
	return e[1][1], e[1][2], true
}
