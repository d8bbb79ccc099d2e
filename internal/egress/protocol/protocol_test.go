package protocol

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func pair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// TestMessagesCarryFiles: a message arrives whole with its files, which
// are new descriptors of the same files.
func TestMessagesCarryFiles(t *testing.T) {
	a, b := pair(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Send(a, Start{Listeners: 1, Pidfd: true}, f, f); err != nil {
		t.Fatal(err)
	}
	var got Start
	files, err := Recv(b, &got, 4096, 2)
	if err != nil || got != (Start{Listeners: 1, Pidfd: true}) || len(files) != 2 {
		t.Fatalf("got %+v, %d files, %v", got, len(files), err)
	}
	for _, g := range files {
		var st1, st2 unix.Stat_t
		_ = unix.Fstat(int(f.Fd()), &st1)
		_ = unix.Fstat(int(g.Fd()), &st2)
		if st1.Ino != st2.Ino {
			t.Errorf("a file of another inode")
		}
		g.Close()
	}
}

// TestRecvRefusesWhatItCannotHold: a message longer than the bound, or
// with more files than the bound, is an error, and its files are closed;
// a hang-up is ErrClosed.
func TestRecvRefusesWhatItCannotHold(t *testing.T) {
	a, b := pair(t)
	if err := Send(a, Event{Host: strings.Repeat("x", 8000)}); err != nil {
		t.Fatal(err)
	}
	var e Event
	if _, err := Recv(b, &e, 4096, 0); err == nil {
		t.Error("a message past the bound was read")
	}
	f, _ := os.Open(os.DevNull)
	defer f.Close()
	if err := Send(a, Start{}, f, f, f); err != nil {
		t.Fatal(err)
	}
	var s Start
	if files, err := Recv(b, &s, 4096, 1); err == nil || files != nil {
		t.Errorf("three files where one may come: %v, %d", err, len(files))
	}
	if err := Send(a, Config{Rules: strings.Repeat("a", MaxMessage)}); err == nil {
		t.Error("a message past MaxMessage was sent")
	}
	unix.Shutdown(a, unix.SHUT_WR)
	if _, err := Recv(b, &s, 4096, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("after a hang-up: %v", err)
	}
}

// TestLargeMessagesGoInASealedMemfd: a message larger than a packet can
// be (a configuration with large secrets) arrives whole, through a sealed
// memfd that is not among the files the receiver gets; an unsealed one is
// refused.
func TestLargeMessagesGoInASealedMemfd(t *testing.T) {
	a, b := pair(t)
	big := Config{Rules: "example.com", Secrets: []Secret{{Name: "A", Value: strings.Repeat("v", 1<<20), Hosts: []string{"example.com"}}}}
	if err := Send(a, big); err != nil {
		t.Fatal(err)
	}
	var got Config
	files, err := Recv(b, &got, MaxMessage, 0)
	if err != nil || len(files) != 0 || len(got.Secrets) != 1 || got.Secrets[0].Value != big.Secrets[0].Value {
		t.Fatalf("got %d files, %v", len(files), err)
	}
	// A peer that sends an unsealed file in a message's place.
	fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "x")
	defer f.Close()
	_, _ = f.Write([]byte(`{"rules":"x"}`))
	if err := unix.Sendmsg(a, []byte{inMemfd}, unix.UnixRights(fd), nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Recv(b, &got, MaxMessage, 0); err == nil {
		t.Error("a message in an unsealed memfd was read")
	}
}
