package supervisor

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
)

// Persistent is a sandbox that runs commands on request (the prototype of
// docs/persistent.md's exec path): its init, once ready, starts each
// command it is sent with the sandbox's own description and reports its
// exit, and the sandbox lives until Close. Files written by one command
// (in /tmp, say) are there for the next, and what one leaves running
// stays. Its methods may be called from several goroutines.
type Persistent struct {
	s         *supervisor
	closeOnce sync.Once
	// sending keeps messages whole: the control socket is a stream, and
	// a message larger than what one sendmsg takes goes in parts.
	sending sync.Mutex
}

// send writes one message to the init.
func (ps *Persistent) send(msg control.Message, files ...*os.File) error {
	ps.sending.Lock()
	defer ps.sending.Unlock()
	return ps.s.conn.Send(msg, files...)
}

// execReplies hands the init's reports about each command of a persistent
// sandbox to the Exec waiting for them. Ids are never reused, so a late
// report cannot reach another command's Exec; a report for an id no one
// waits for is dropped.
type execReplies struct {
	mu      sync.Mutex
	last    uint64
	waiting map[uint64]chan execReply
}

type execReply struct {
	msg   control.Message
	files []*os.File
}

// open registers a new command and returns its id and where its reports
// come: its start (or failure), then its exit.
func (e *execReplies) open() (uint64, chan execReply) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last++
	ch := make(chan execReply, 2)
	e.waiting[e.last] = ch
	return e.last, ch
}

func (e *execReplies) forget(id uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waiting, id)
}

// deliver gives msg to its command's Exec; the channel holds both reports
// a command gets, so the reader of the control socket never waits here.
func (e *execReplies) deliver(msg control.Message, files []*os.File) {
	e.mu.Lock()
	ch, ok := e.waiting[msg.Exec]
	if ok && msg.Kind != control.KindStarted {
		delete(e.waiting, msg.Exec)
	}
	e.mu.Unlock()
	if !ok {
		for _, f := range files {
			f.Close()
		}
		return
	}
	ch <- execReply{msg, files}
}

// BootPersistent builds the sandbox of p (whose command is not run) and
// returns it once its init is ready for commands. The caller must Close
// it.
func BootPersistent(job *Job, p *Plan, t *Timings) (*Persistent, error) {
	if p.Config.Process.TTY {
		p.Close()
		return nil, &SetupError{Step: "init", Err: errors.New("a persistent sandbox has no terminal of its own")}
	}
	p.Config.Persistent = true
	s := newSupervisor(job, p, t)
	s.execs = &execReplies{waiting: map[uint64]chan execReply{}}
	if err := s.boot(); err != nil {
		s.close()
		return nil, err
	}
	// The init's own stdio carries nothing of the commands, which get
	// theirs with each exec.
	s.handOutNothing()
	select {
	case <-s.ready:
		return &Persistent{s: s}, nil
	case rep := <-s.reports:
		<-s.reaped
		s.copies.Wait()
		s.close()
		close(s.finished)
		if rep.setupErr != nil {
			return nil, rep.setupErr
		}
		return nil, &SetupError{Step: "init", Err: errors.New("ended before it was ready")}
	}
}

// Exec runs process in the sandbox with the given stdio (which it sends,
// and the caller may close once Exec returns) and returns its exit status
// as jail reports it: code, and the signal that killed it or 0. A command
// that cannot be started is an *ExecError (code 126 or 127) or a
// *SetupError. When ctx is done the command is killed.
func (ps *Persistent) Exec(ctx context.Context, process *config.Process, stdin, stdout, stderr *os.File) (code, signal int, err error) {
	st, err := runExec(ctx, ps.send, ps.s.execs, ps.s.reaped, ExecRequest{Process: process}, []*os.File{stdin, stdout, stderr})
	return st.Code, st.Signal, err
}

// Close ends the sandbox: the init, hung up on, kills everything in it and
// ends; then its cgroup and everything the supervisor held are released.
func (ps *Persistent) Close() {
	ps.closeOnce.Do(func() {
		s := ps.s
		_ = s.conn.Hangup()
		<-s.reaped
		s.copies.Wait()
		s.close()
		close(s.finished)
	})
}

// TakeListeners returns the sockets the init opened for the egress
// gateway (Plan.Config.Listen), which the caller then owns; nil after the
// first call.
func (ps *Persistent) TakeListeners() []*os.File {
	ls := ps.s.listeners
	ps.s.listeners = nil
	return ls
}

// Handover is what a persistent sandbox's monitor takes over from the
// process that booted it (docs/persistent.md): the init's first
// connection, a pidfd of the init, and the write end of its cgroup
// janitor's pipe (nil without a cgroup).
type Handover struct {
	Control   *os.File
	InitPidfd *os.File
	Janitor   *os.File
	// CgroupPaths are the sandbox's cgroup directories, for reading its
	// counters.
	CgroupPaths []string
}

// Handover gives what the monitor needs. The caller is about to replace
// this process by the monitor (execve), so nothing is released here: the
// files stay open and the init stays this process's child.
func (ps *Persistent) Handover() (Handover, error) {
	s := ps.s
	init, ok := s.init.(*childInit)
	if !ok || init.pidfd == nil {
		return Handover{}, errors.New("the init has no pidfd (Linux 5.3 or later is needed)")
	}
	h := Handover{Control: s.conn.File(), InitPidfd: init.pidfd}
	if s.janitorStarted() && s.janitorState.pipe != nil {
		h.Janitor = s.janitorState.pipe
	}
	if s.cgroup != nil {
		h.CgroupPaths = s.cgroup.Paths()
	}
	return h, nil
}
