package control

import (
	"errors"
	"io"
	"testing"
	"time"
)

// TestHangupEndsThePeersRead: an init blocked reading its end (a blocking
// one, as the init's is) gets EOF once the supervisor hangs up, while the
// supervisor's end stays open; and the supervisor's own read ends too.
func TestHangupEndsThePeersRead(t *testing.T) {
	ours, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	peer := FromFD(int(theirs.Fd()))
	defer theirs.Close()

	peerRead := make(chan error, 1)
	go func() {
		_, _, err := peer.Recv()
		peerRead <- err
	}()
	ourRead := make(chan error, 1)
	go func() {
		_, _, err := ours.Recv()
		ourRead <- err
	}()
	time.Sleep(20 * time.Millisecond) // both reads are waiting
	if err := ours.Hangup(); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]chan error{"peer": peerRead, "supervisor": ourRead} {
		select {
		case err := <-read:
			if !errors.Is(err, io.EOF) {
				t.Errorf("%s's read ended with %v; want EOF", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s's read did not end after the hangup (a hang, not a timing check)", name)
		}
	}
}
