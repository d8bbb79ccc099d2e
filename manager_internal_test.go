package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/sandboxdir"
	"github.com/jail-sandbox/jail/internal/supervisor"
)

// TestFingerprintFollowsWhatTheSpecResolvesTo: the digest that keeps
// create --reuse from serving a changed configuration changes with the
// profile's policy and is stable otherwise.
func TestFingerprintFollowsWhatTheSpecResolvesTo(t *testing.T) {
	a, err := fingerprint(&Spec{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := fingerprint(&Spec{Profile: DefaultProfile})
	strict, err := fingerprint(&Spec{Profile: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	if a != again || a == strict {
		t.Errorf("default %s, default again %s, strict %s", a, again, strict)
	}
	if _, err := fingerprint(&Spec{Image: "no-such-image-jail-test"}); err == nil {
		t.Error("an image not in the store gave a fingerprint")
	}
}

// TestSameSandbox: what create --reuse compares.
func TestSameSandbox(t *testing.T) {
	base := storedOf(&Spec{Memory: 1 << 30, Env: []string{}})
	for _, c := range []struct {
		name string
		spec Spec
		same bool
	}{
		{"the same", Spec{Memory: 1 << 30}, true},
		{"labels differ", Spec{Memory: 1 << 30, Labels: map[string]string{"a": "b"}}, true},
		{"memory", Spec{Memory: 2 << 30}, false},
		{"env", Spec{Memory: 1 << 30, Env: []string{"A=1"}}, false},
		{"secrets", Spec{Memory: 1 << 30, Secrets: []string{"T"}}, false},
		{"workspace", Spec{Memory: 1 << 30, Workspace: "/w"}, false},
		{"ttl", Spec{Memory: 1 << 30, TTL: 1}, false},
		{"profile named as the default", Spec{Memory: 1 << 30, Profile: DefaultProfile}, true},
		{"another profile", Spec{Memory: 1 << 30, Profile: "strict"}, false},
		{"mounts", Spec{Memory: 1 << 30, Mounts: []Mount{{Source: "/a", Destination: "/b"}}}, false},
		{"net", Spec{Memory: 1 << 30, Net: "allow=x"}, false},
	} {
		if got := sameSandbox(base, storedOf(&c.spec)); got != c.same {
			t.Errorf("%s: same %v, want %v", c.name, got, c.same)
		}
	}
}

// runningSandbox creates the sandbox name with a Manager of the test's
// own (removed when the test ends) and returns its open state directory.
func runningSandbox(t *testing.T, name string) *sandboxdir.Sandbox {
	t.Helper()
	sb, _ := runningSandboxOf(t, name)
	return sb
}

// runningSandboxOf is runningSandbox that also returns its Manager.
func runningSandboxOf(t *testing.T, name string) (*sandboxdir.Sandbox, *Manager) {
	t.Helper()
	dir := t.TempDir()
	m, err := NewManager(ManagerOptions{StateDir: dir + "/state", AuditLog: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Create(context.Background(), Spec{Name: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Remove(name, true); err != nil && !errors.Is(err, ErrNotFound) {
			t.Errorf("rm -f %s: %v", name, err)
		}
	})
	sb, err := m.store.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, m
}

// everyClientSlot attaches the 255 clients a sandbox's init serves,
// closed when the test ends.
func everyClientSlot(t *testing.T, sb *sandboxdir.Sandbox) []*supervisor.Client {
	t.Helper()
	var clients []*supervisor.Client
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	for i := 0; i < 255; i++ {
		c, err := supervisor.Dial(sb.Dir())
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		clients = append(clients, c)
	}
	return clients
}

// TestForcedRemoveWithEveryClientSlotTaken: rm -f removes a sandbox whose
// init serves as many clients as it can, and so refuses rm's connection
// (rm waited for an end it could not ask for, failed, and left the
// sandbox running); rm without -f says why it cannot.
func TestForcedRemoveWithEveryClientSlotTaken(t *testing.T) {
	sb, m := runningSandboxOf(t, "full")
	clients := everyClientSlot(t, sb)
	if _, err := clients[254].Status(context.Background()); err != nil {
		t.Fatalf("the 255th client: %v", err)
	}
	if err := m.Remove("full", false); err == nil || !strings.Contains(err.Error(), "as many clients") {
		t.Errorf("rm without -f: %v", err)
	}
	if err := m.Remove("full", true); err != nil {
		t.Fatalf("rm -f: %v", err)
	}
	if live, _ := sb.Live(); live {
		t.Error("the sandbox lives on after rm -f")
	}
	for _, c := range clients {
		select {
		case <-c.Gone():
		case <-time.After(5 * time.Second):
			t.Fatal("a client's connection outlived the sandbox")
		}
	}
}

// TestTooManyClientsAreToldSo: a sandbox's init serves 255 client
// connections; the next is refused with a reason, not left to look like a
// sandbox that is gone, and a freed connection is served again.
func TestTooManyClientsAreToldSo(t *testing.T) {
	ctx := context.Background()
	sb := runningSandbox(t, "many")
	clients := everyClientSlot(t, sb)
	// Each is attached: its status is answered.
	if _, err := clients[254].Status(ctx); err != nil {
		t.Fatalf("the 255th client: %v", err)
	}
	extra, err := supervisor.Dial(sb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	_, err = extra.Exec(ctx, supervisor.ExecRequest{Process: &config.Process{Args: []string{"true"}, Cwd: "/"}, Stdin: null, Stdout: null, Stderr: null})
	if err == nil || !strings.Contains(err.Error(), "as many clients as it can") {
		t.Fatalf("the 256th client's exec: %v", err)
	}
	clients[0].Close()
	clients = clients[1:]
	// The slot is free once the init has seen the hangup.
	var again error
	for i := 0; i < 100; i++ {
		c, err := supervisor.Dial(sb.Dir())
		if err == nil {
			_, again = c.Status(ctx)
			c.Close()
			if again == nil {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if again != nil {
		t.Fatalf("a client after one left: %v", again)
	}
}

// TestTricklingClientIsDropped: a client that sends a message a byte at a
// time loses its connection once the message is not whole within the
// init's bound, rather than holding the init (and every other client) for
// as long as it trickles.
func TestTricklingClientIsDropped(t *testing.T) {
	ctx := context.Background()
	sb := runningSandbox(t, "drip")
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(sock, &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/ctl.sock", sb.Dir().Fd())}); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetNonblock(sock, true)
	first := control.FromFD(sock)
	msg, files, err := first.Recv()
	first.Close()
	if err != nil || msg.Kind != "attached" || len(files) != 1 {
		t.Fatalf("attach: %v %q %d", err, msg.Kind, len(files))
	}
	conn := files[0]
	defer conn.Close()
	// A header announcing 1000 bytes, then one byte a second.
	if _, err := conn.Write([]byte{0xe8, 0x03, 0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	dropped := false
	for i := 0; i < 30 && !dropped; i++ {
		time.Sleep(time.Second)
		if _, err := conn.Write([]byte{0}); err != nil {
			dropped = true
		}
	}
	if !dropped {
		t.Fatal("a client trickling a message for 30 s kept its connection")
	}
	// The sandbox serves on.
	c, err := supervisor.Dial(sb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("after the trickling client: %v", err)
	}
}
