package test

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openTerminal allocates a pseudo-terminal for the test to play the user.
func openTerminal(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && rootless != nil {
		// The rootless jail must be able to use its terminal, as a user's
		// own login terminal would be theirs.
		_ = os.Chown(s.Name(), rootless.uid, rootless.gid)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// screen collects what the terminal shows.
type screen struct {
	buf  bytes.Buffer
	data chan []byte
}

func watch(master *os.File) *screen {
	s := &screen{data: make(chan []byte, 64)}
	go func() {
		for {
			b := make([]byte, 4096)
			n, err := master.Read(b)
			if n > 0 {
				s.data <- b[:n]
			}
			if err != nil {
				close(s.data)
				return
			}
		}
	}()
	return s
}

// waitFor reads until the screen shows want (a hang guard, not a timing
// check).
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(s.buf.String(), want) {
		select {
		case b, ok := <-s.data:
			if !ok {
				t.Fatalf("terminal closed before %q; screen:\n%s", want, s.buf.String())
			}
			s.buf.Write(b)
		case <-deadline:
			t.Fatalf("%q never appeared; screen:\n%s", want, s.buf.String())
		}
	}
}

// waitForAsking repeats ask until the screen shows want: for state that
// changes asynchronously, such as a window size travelling as SIGWINCH.
func (s *screen) waitForAsking(t *testing.T, want string, ask func()) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never appeared; screen:\n%s", want, s.buf.String())
		}
		ask()
		tick := time.After(200 * time.Millisecond)
	drain:
		for {
			select {
			case b, ok := <-s.data:
				if !ok {
					t.Fatalf("terminal closed before %q", want)
				}
				s.buf.Write(b)
			case <-tick:
				break drain
			}
		}
	}
}

func TestInteractiveShellOnATerminal(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		master, slave := openTerminal(t)
		if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 101}); err != nil {
			t.Fatal(err)
		}
		cmd := command(m, "run", "-t", "--", "/bin/sh")
		cmd.Env = append(cmd.Env, "TERM=xterm", "PS1=$ ")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		defer func() {
			select {
			case <-done:
			default:
				cmd.Process.Kill()
				<-done
			}
		}()
		scr := watch(master)

		// The sandbox's shell is on a terminal of its own.
		master.WriteString("tty; echo sum=$((6*7))\r")
		scr.waitFor(t, "sum=42")
		scr.waitFor(t, "/dev/pts/")

		// The window size followed the caller's terminal, and follows it
		// when it changes.
		master.WriteString("stty size\r")
		scr.waitFor(t, "33 101")
		unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
		scr.waitForAsking(t, "40 120", func() { master.WriteString("stty size\r") })

		// Ctrl-C interrupts the sandboxed command, not jail. The quotes keep
		// the terminal's echo of the typed line from matching the output.
		master.WriteString("echo sle''eping; sleep 1000; echo not-interrupted\r")
		scr.waitFor(t, "sleeping")
		time.Sleep(100 * time.Millisecond) // the sleep has started by now, or ^C hits the shell: both interrupt the line
		master.WriteString("\x03")
		master.WriteString("echo after-''interrupt $?\r")
		scr.waitFor(t, "after-interrupt")
		if strings.Contains(scr.buf.String(), "\nnot-interrupted") {
			t.Errorf("Ctrl-C did not interrupt the command")
		}

		// Line editing: erase a typo before Enter.
		master.WriteString("echo tyx\x7fpo-fixed\r")
		scr.waitFor(t, "typo-fixed")

		master.WriteString("exit 5\r")
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("jail did not exit after the shell did")
		}
		if code := cmd.ProcessState.ExitCode(); code != 5 {
			t.Errorf("exit %d, want 5; screen:\n%s", code, scr.buf.String())
		}
	})
}

// TestNoTerminalInjection: without -t, a caller's terminal never reaches the
// sandbox, so TIOCSTI cannot push keystrokes into it (bwrap CVE-2017-5226).
func TestNoTerminalInjection(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		_, slave := openTerminal(t)
		cmd := command(m, withProbe("--", "/opt/probe/jailprobe", "tiocsti")...)
		cmd.Stdin = slave
		r := runCmd(t, cmd)
		if r.code == 0 {
			t.Errorf("TIOCSTI on stdin succeeded inside the sandbox: %s", r.stdout)
		}
	})
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
