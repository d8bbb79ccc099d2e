package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/api"
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
	s := ps.s
	id, replies := s.execs.open()
	defer s.execs.forget(id)
	msg := control.Message{Kind: control.KindExec, Exec: id, Process: process}
	if err := ps.send(msg, stdin, stdout, stderr); err != nil {
		return 0, 0, &SetupError{Step: "exec", Err: err}
	}
	var pidfd *os.File
	defer func() {
		if pidfd != nil {
			pidfd.Close()
		}
	}()
	// killed: ctx ended, and the init was asked to kill the command's
	// process group (KindSignal), so that what the command started goes
	// too. The init reads the request after the exec's, so it also kills
	// a command that starts after the cancel; the pidfd is not used for
	// it, since a command killed by it could be reaped, and its group
	// forgotten, before the init reads the request.
	killed := false
	killGroup := func() {
		_ = ps.send(control.Message{Kind: control.KindSignal, Exec: id, Signal: int(unix.SIGKILL)})
	}
	done := ctx.Done()
	for {
		select {
		case r := <-replies:
			switch r.msg.Kind {
			case control.KindStarted:
				if len(r.files) > 0 {
					pidfd = r.files[0]
					for _, f := range r.files[1:] {
						f.Close()
					}
				}
				continue
			case control.KindExit:
				if killed {
					return r.msg.Code, r.msg.Signal, ctx.Err()
				}
				return r.msg.Code, r.msg.Signal, nil
			case control.KindExecError:
				return r.msg.Code, 0, &ExecError{Code: r.msg.Code, Reason: r.msg.Reason}
			case control.KindError:
				return api.ExitSetup, 0, &SetupError{Step: r.msg.Step, Err: errors.New(r.msg.Reason)}
			default:
				return api.ExitSetup, 0, &SetupError{Step: "exec", Err: fmt.Errorf("unexpected report %q", r.msg.Kind)}
			}
		case <-done:
			done, killed = nil, true
			killGroup()
		case <-s.reaped:
			if !stillReporting(replies) {
				return api.ExitSetup, 0, &SetupError{Step: "exec", Err: errors.New("the sandbox ended")}
			}
		}
	}
}

// stillReporting reports whether a report waits in replies, which the
// select of Exec then takes, even though the sandbox has ended meanwhile.
func stillReporting(replies chan execReply) bool { return len(replies) > 0 }

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
