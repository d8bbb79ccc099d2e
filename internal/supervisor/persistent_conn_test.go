package supervisor

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
)

// The init's clients' connections, driven as its monitor drives them: an
// attach message on the first connection hands the init one end of a
// socket pair, and the test speaks the protocol on the other.

// bootForClients boots a persistent sandbox for one test and returns it
// with its process description.
func bootForClients(t *testing.T) (*Persistent, config.Process) {
	t.Helper()
	plan := persistentPlan(t)
	proc := plan.Config.Process
	ps, err := BootPersistent(testJob(), plan, &Timings{Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	return ps, proc
}

// attachClient attaches a client's connection to the init of ps and
// returns the client's end (blocking), closed when the test ends.
func attachClient(t *testing.T, ps *Persistent) *os.File {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	initEnd, client := os.NewFile(uintptr(fds[0]), "init-end"), os.NewFile(uintptr(fds[1]), "client-end")
	err = ps.send(control.Message{Kind: control.KindAttach}, initEnd)
	initEnd.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// clientConn speaks the protocol on a client's end.
func clientConn(t *testing.T, f *os.File) *control.Conn {
	t.Helper()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := control.FromFD(fd)
	t.Cleanup(func() { c.Close() })
	return c
}

// recvKind reads reports on c until one of kind, closing the files of
// the others; it fails the test if the connection ends first.
func recvKind(t *testing.T, c *control.Conn, kind string) (control.Message, []*os.File) {
	t.Helper()
	for {
		m, files, err := c.Recv()
		if err != nil {
			t.Fatalf("waiting for a %s report: %v", kind, err)
		}
		if m.Kind == kind {
			return m, files
		}
		for _, f := range files {
			f.Close()
		}
	}
}

// settle asks the init for its status twice on c: the second answer comes
// from a round of its loop after the one that read anything sent before
// the first, so whatever that round did (dropping a connection, closing
// descriptors) is done.
func settle(t *testing.T, c *control.Conn) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if err := c.Send(control.Message{Kind: control.KindStatus}); err != nil {
			t.Fatal(err)
		}
		recvKind(t, c, control.KindStatus)
	}
}

// hungUp says whether poll sees fd hung up (POLLHUP) now; the caller has
// made sure that whatever would hang it up has happened.
func hungUp(t *testing.T, fd uintptr) bool {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return pfd[0].Revents&unix.POLLHUP != 0
	}
}

// TestPersistentInitClosesWhatABrokenClientMessageBrought: a client whose
// message breaks the protocol loses its connection, and the descriptors
// that came with that message are closed, not kept by the init for its
// whole life (a client could otherwise fill the init's descriptor table,
// or hold a pipe of the host open through it).
func TestPersistentInitClosesWhatABrokenClientMessageBrought(t *testing.T) {
	ps, _ := bootForClients(t)
	witness := attachClient(t, ps)
	witnessConn := clientConn(t, witness)
	spawn, err := frame(control.Message{Kind: control.KindSpawn, Spawn: &control.Spawn{Path: "/bin/true", Args: []string{"true"}, Owner: -1}})
	if err != nil {
		t.Fatal(err)
	}
	header := func(size uint32) []byte { return binary.LittleEndian.AppendUint32(nil, size) }
	for _, c := range []struct {
		name string
		data []byte
		// hangup: the client shuts its sending side after the data.
		hangup bool
	}{
		{"a message over the clients' bound", header(5 << 20), false},
		{"a body that does not decode", append(header(3), 0x7f, 0x7f, 0x7f), false},
		{"a body cut short", append(header(100), 1, 2, 3), true},
		{"a header cut short", []byte{1, 0}, true},
		{"a spawn, which is for a forker", spawn, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := attachClient(t, ps)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = unix.Sendmsg(int(client.Fd()), c.data, unix.UnixRights(int(w.Fd()), int(w.Fd()), int(w.Fd())), nil, 0)
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if c.hangup {
				if err := unix.Shutdown(int(client.Fd()), unix.SHUT_WR); err != nil {
					t.Fatal(err)
				}
			}
			// The init handles its connections in their order within
			// one wake-up: the witness's answer may come before this
			// client's message is read, so the check is asked again
			// (a bounded number of times: a kept connection fails it).
			clientGone, pipeGone := false, false
			for i := 0; i < 200 && !(clientGone && pipeGone); i++ {
				settle(t, witnessConn)
				clientGone, pipeGone = hungUp(t, client.Fd()), hungUp(t, r.Fd())
				if !(clientGone && pipeGone) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if !clientGone {
				t.Errorf("the client kept its connection")
			}
			if !pipeGone {
				t.Errorf("the init keeps the pipe's write end the broken message brought")
			}
		})
	}
}

// frame is msg as it goes on the wire: its length, then its body.
func frame(msg control.Message) ([]byte, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	a, b := control.FromFD(fds[0]), os.NewFile(uintptr(fds[1]), "frame")
	defer a.Close()
	defer b.Close()
	if err := a.Send(msg); err != nil {
		return nil, err
	}
	a.Close()
	buf := make([]byte, 1<<16)
	n, err := b.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// TestPersistentInitDropsEveryClientThatCannotTakeItsReport: when the
// exits of two clients' commands are reaped in one round of the init's
// loop and neither client can take its report (here: it shut its reading
// side; a client that does not read is the same), both lose their
// connections. Neither may be left attached with its report lost, its
// exec then waiting for an exit that never comes.
func TestPersistentInitDropsEveryClientThatCannotTakeItsReport(t *testing.T) {
	ps, proc := bootForClients(t)
	init, ok := ps.s.init.(*childInit)
	if !ok || init.pidfd == nil {
		t.Skip("the init has no pidfd")
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	witness := clientConn(t, attachClient(t, ps))

	p := proc
	p.Args = []string{"sleep", "1000"}
	type client struct {
		end   *os.File
		pidfd *os.File
	}
	var clients []client
	for i := 0; i < 2; i++ {
		end := attachClient(t, ps)
		conn := clientConn(t, end)
		if err := conn.Send(control.Message{Kind: control.KindExec, Exec: 1, Process: &p}, null, null, null); err != nil {
			t.Fatal(err)
		}
		_, files := recvKind(t, conn, control.KindStarted)
		if len(files) == 0 {
			t.Fatal("a started report with no pidfd")
		}
		for _, f := range files[1:] {
			f.Close()
		}
		defer files[0].Close()
		clients = append(clients, client{end, files[0]})
	}
	// Both commands end while the init is stopped, so that it reaps
	// both in one round; and neither client reads its exit.
	for _, c := range clients {
		if err := unix.Shutdown(int(c.end.Fd()), unix.SHUT_RD); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.PidfdSendSignal(int(init.pidfd.Fd()), unix.SIGSTOP, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if err := unix.PidfdSendSignal(int(c.pidfd.Fd()), unix.SIGKILL, nil, 0); err != nil {
			t.Fatal(err)
		}
		// A pidfd polls readable once its process has exited.
		pfd := []unix.PollFd{{Fd: int32(c.pidfd.Fd()), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(pfd, -1); err != unix.EINTR {
				break
			}
		}
	}
	if err := unix.PidfdSendSignal(int(init.pidfd.Fd()), unix.SIGCONT, nil, 0); err != nil {
		t.Fatal(err)
	}
	settle(t, witness)
	for i, c := range clients {
		if !hungUp(t, c.end.Fd()) {
			t.Errorf("client %d lost its command's exit report and kept its connection", i+1)
		}
	}
}
