package supervisor

import (
	"crypto/rand"
	"fmt"
	"os"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/programs"
)

// startJanitor names the sandbox's cgroup and starts, in the background,
// the janitor that removes it (the helper program), unless a pool's
// janitor (s.watch) watches the sandbox. It starts as early as boot does,
// to overlap the init's start; createCgroup waits for it.
func (s *supervisor) startJanitor() {
	if s.plan.Cgroup.Version == cgroups.None || s.watch != nil {
		return
	}
	s.cgroupName = sandboxName()
	paths := cgroups.PathsFor(s.plan.Cgroup, s.cgroupName)
	started := make(chan janitorHandle, 1)
	s.janitor = started
	go func() { started <- ownJanitor(s.source, paths) }()
}

// ownJanitor starts a janitor of paths of a sandbox's own, from src. It
// returns once the janitor runs, in a session of its own (spawn.Start
// returns after the exec): from then on no kill of this process, or of its
// process group or session, leaves paths to nobody. A zero handle: none
// could be started.
func ownJanitor(src *programs.Source, paths []string) janitorHandle {
	p, err := src.Open(programs.Helper)
	if err != nil {
		return janitorHandle{}
	}
	defer p.Close()
	release, wait, err := janitor.Start(p.Path, paths)
	if err != nil {
		return janitorHandle{}
	}
	return janitorHandle{pipe: release, release: func(bool) { release.Close(); go wait() }}
}

// createCgroup makes the sandbox's cgroup, with a janitor that removes it
// even if this process is killed: the supervisor's shared one (s.watch) or
// one of its own (startJanitor). Nothing is made before that janitor knows
// the cgroup's name and runs, so that there is no moment at which this
// process can die leaving a cgroup nobody removes. (Only where no janitor
// could be started is it made all the same: a later janitor's sweep takes
// it then.)
func (s *supervisor) createCgroup() error {
	if s.plan.Cgroup.Version == cgroups.None {
		return nil
	}
	if s.janitor == nil {
		started := make(chan janitorHandle, 1)
		s.janitor = started
		if s.spares != nil {
			// Its janitor watches it still: it was never forgotten.
			if cg := s.spares.take(s.plan.Cgroup, s.plan.Limits); cg != nil {
				s.cgroup = cg
				started <- s.watched(cg.Paths())
				return nil
			}
		}
		s.cgroupName = sandboxName()
		paths := cgroups.PathsFor(s.plan.Cgroup, s.cgroupName)
		if s.watch != nil && s.watch.Add(paths) == nil {
			started <- s.watched(paths)
		} else {
			started <- ownJanitor(s.source, paths)
		}
	}
	s.janitorStarted()
	cg, err := cgroups.New(s.plan.Cgroup, s.cgroupName, s.plan.Limits)
	if err != nil {
		return &SetupError{Step: "cgroup", Err: err}
	}
	s.cgroup = cg
	return nil
}

// watched is the handle of a cgroup that s.watch knows: once the supervisor
// is done, the cgroup is removed here (after the init is gone) and the
// janitor told.
func (s *supervisor) watched(paths []string) janitorHandle {
	return janitorHandle{watched: true, release: func(destroyed bool) {
		forget := func() {
			if !destroyed && s.spares != nil && s.cgroup != nil {
				kept, evicted := s.spares.give(s.plan.Cgroup, s.plan.Limits, s.cgroup)
				if evicted != nil {
					_ = removeWatched(s.watch, evicted)
				}
				if kept {
					s.done()
					return
				}
			}
			if destroyed || s.cgroup == nil || s.cgroup.Destroy() == nil {
				_ = s.watch.Forget(paths)
			}
			s.done()
		}
		if destroyed {
			forget()
			return
		}
		go func() {
			<-s.reaped
			forget()
		}()
	}}
}

// janitorHandle lets a started janitor go, telling it whether the cgroup is
// already removed; release is nil when it could not be started.
type janitorHandle struct {
	release func(destroyed bool)
	// pipe is the write end of an own janitor's stdin: it removes the
	// cgroup once every copy is closed.
	pipe *os.File
	// watched: the shared janitor of s.watch; release ends with s.done.
	watched bool
}

// janitorStarted reports whether a janitor watches the sandbox's cgroup.
func (s *supervisor) janitorStarted() bool {
	if s.janitor == nil {
		return false
	}
	if s.janitorState == nil {
		h := <-s.janitor
		s.janitorState = &h
	}
	return s.janitorState.release != nil
}

// destroyCgroup removes the cgroup, or leaves that to the janitor when the
// init is still exiting, then lets the janitor go.
func (s *supervisor) destroyCgroup() {
	if s.cgroup != nil {
		s.cgroup.Settle()
	}
	if s.cgroup != nil && s.spares != nil && s.janitorStarted() && s.janitorState.watched {
		// Offered for reuse, or else removed, once the init is reaped.
		s.janitorState.release(false)
		return
	}
	destroyed := false
	if s.cgroup != nil && !s.leftToJanitor {
		destroyed = s.cgroup.Destroy() == nil
	} else if s.cgroup != nil {
		// Its counters are read: the janitor removes it once the init
		// is gone, or a sweep does.
		s.cgroup.Close()
	}
	if s.janitorStarted() {
		s.janitorState.release(destroyed)
		if s.janitorState.watched {
			return // s.done is called once the cgroup is gone
		}
	}
	s.done()
}

// done tells the owner of the supervisor (a Pool) that nothing of the
// sandbox is left on the host.
func (s *supervisor) done() {
	if s.onDone != nil {
		s.onDone()
	}
}

// sandboxName names a sandbox uniquely on this host.
func sandboxName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%x", os.Getpid(), b)
}
