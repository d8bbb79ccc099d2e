package namespaces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
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
// map them are installed.
func callerSubIDs() (subIDs, bool) {
	if os.Geteuid() == 0 {
		return subIDs{}, false
	}
	for _, h := range mapHelpers {
		if _, err := exec.LookPath(h); err != nil {
			return subIDs{}, false
		}
	}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		name = u.Username
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
	if sub, ok := callerSubIDs(); ok {
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
