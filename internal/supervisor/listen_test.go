package supervisor

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/control"
)

// TestListenSurvivesRepeatedReports: an init that reports ready, or its
// exit, more than once (one the sandbox's command took over) neither
// panics the supervisor, a server's whole process, by closing ready twice,
// nor blocks its listener on a second exit report, which would leave the
// run waiting for its reports for ever. The first of each counts.
func TestListenSurvivesRepeatedReports(t *testing.T) {
	ours, theirs, err := control.Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	// The init's end, as the init speaks on it (one owner of the fd).
	fd, err := unix.Dup(int(theirs.Fd()))
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	peer := control.FromFD(fd)
	s := newSupervisor(&Job{}, &Plan{}, &Timings{})
	s.conn = ours
	for _, m := range []control.Message{
		{Kind: control.KindReady}, {Kind: control.KindReady},
		{Kind: control.KindExit, Code: 3}, {Kind: control.KindExit, Code: 4},
	} {
		if err := peer.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	peer.Close()
	rep := s.listen()
	if !rep.exited || rep.code != 3 {
		t.Errorf("report %+v; want the first exit, code 3", rep)
	}
	if first := <-s.exitReport; first.code != 3 {
		t.Errorf("exit report of code %d; want 3", first.code)
	}
}
