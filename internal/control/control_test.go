package control

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestRecvRefusesTruncatedRights: a peer that passes more descriptors than
// a message may carry (a raw sendmsg, past Send's own check) has its
// message refused rather than delivered with descriptors silently missing
// (MSG_CTRUNC), and the descriptors that did arrive are closed, not leaked.
// At the bound, every descriptor arrives.
func TestRecvRefusesTruncatedRights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   int
		wantErr bool
	}{
		{"at the bound", MaxFiles, false},
		{"one past the bound", MaxFiles + 1, true},
		{"far past the bound", 3 * MaxFiles, true}, // the kernel takes at most 253 (SCM_MAX_FD)
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs, err := Pair()
			if err != nil {
				t.Fatal(err)
			}
			defer ours.Close()
			defer theirs.Close()
			before := openFDs(t)

			devNull, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			body, err := encode(Message{Kind: KindStarted})
			if err != nil {
				t.Fatal(err)
			}
			msg := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
			msg = append(msg, body...)
			fds := make([]int, tc.files)
			for i := range fds {
				fds[i] = int(devNull.Fd())
			}
			if err := unix.Sendmsg(int(theirs.Fd()), msg, unix.UnixRights(fds...), nil, 0); err != nil {
				t.Fatal(err)
			}
			devNull.Close()

			m, files, err := ours.Recv()
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "truncated") {
					t.Errorf("Recv of %d files: message %q with %d files, error %v; want a truncation error", tc.files, m.Kind, len(files), err)
				}
			} else if err != nil || len(files) != tc.files {
				t.Errorf("Recv of %d files: %d files, error %v", tc.files, len(files), err)
			}
			closeAll(files)
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after the refused message, %d before: received descriptors leaked", after, before)
			}
		})
	}
}

// TestLimitReceiveRefusesLargerMessages: an end limited to reports refuses
// a message past its limit (by its header, before reading the body) and
// accepts one within it; an unlimited end takes the larger one.
func TestLimitReceiveRefusesLargerMessages(t *testing.T) {
	const limit = 1024
	for _, tc := range []struct {
		name    string
		limit   int
		reason  int
		wantErr bool
	}{
		{"a report within the limit", limit, limit / 2, false},
		{"a report past the limit", limit, 2 * limit, true},
		{"a report past MaxReport", MaxReport, MaxReport, true},
		{"no limit", 0, 2 * limit, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs, err := Pair()
			if err != nil {
				t.Fatal(err)
			}
			defer ours.Close()
			defer theirs.Close()
			ours.LimitReceive(tc.limit)
			peer := FromFD(int(theirs.Fd()))
			sent := make(chan error, 1)
			go func() { sent <- peer.Send(Message{Kind: KindError, Reason: strings.Repeat("x", tc.reason)}) }()
			m, _, err := ours.Recv()
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "too large") {
					t.Errorf("Recv: %q of %d bytes, error %v; want a too-large error", m.Kind, len(m.Reason), err)
				}
				ours.Hangup() // the unread body: the sender's write ends
			} else if err != nil || len(m.Reason) != tc.reason {
				t.Errorf("Recv: reason of %d bytes, error %v; want %d bytes", len(m.Reason), err, tc.reason)
			}
			<-sent
		})
	}
}
