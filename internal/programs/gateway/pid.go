package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pidFinder tells which process of the sandbox holds the other end of a
// connection or sent a query, for the audit log: it finds the socket in
// the sandbox's network namespace (/proc/INIT/net/tcp or udp) and then the
// process holding it among the init's descendants (/proc/PID/fd). It is
// done beside the connection, never in its way, and gives 0 when the
// process is not found (gone, or too many to look through).
//
// The sandbox decides how much there is to look through (its sockets,
// processes and descriptors) and how often (each query, each connection),
// and the gateway runs outside its cgroup: so at most maxActiveLookups
// lookups run at once (another gives 0 at once, without a goroutine), and
// each reads at most maxSocketLines of the socket table, streamed.
type pidFinder struct {
	initPid int
	// active holds a token per lookup running.
	active chan struct{}

	mu      sync.Mutex
	pending map[netip.AddrPort]*pidLookup
	order   []netip.AddrPort // oldest first, for eviction
}

type pidLookup struct {
	done    chan struct{}
	pid     int
	session int // read with the pid: the process may be gone by the event
}

// Bounds of one lookup and of what is remembered.
const (
	maxLookups       = 4096
	maxActiveLookups = 2
	maxProcesses     = 4096
	maxDescriptors   = 1 << 16
	maxSocketLines   = 1 << 16
	lookupWaitLimit  = 200 * time.Millisecond
)

// newPidFinder returns a finder for the sandbox whose init pidfd names,
// or nil when its pid cannot be read.
func newPidFinder(pidfd *os.File) *pidFinder {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd.Fd()))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
				return &pidFinder{initPid: pid, active: make(chan struct{}, maxActiveLookups), pending: map[netip.AddrPort]*pidLookup{}}
			}
		}
	}
	return nil
}

// start looks up, in the background, the process whose socket has the
// address client (and, for TCP, the peer server).
func (f *pidFinder) start(proto string, client, server netip.AddrPort) {
	if f == nil || !client.IsValid() {
		return
	}
	l := &pidLookup{done: make(chan struct{})}
	f.mu.Lock()
	if _, ok := f.pending[client]; ok {
		f.mu.Unlock()
		return
	}
	if len(f.order) >= maxLookups {
		delete(f.pending, f.order[0])
		f.order = f.order[1:]
	}
	f.pending[client] = l
	f.order = append(f.order, client)
	f.mu.Unlock()
	if !f.acquire() {
		close(l.done) // pid 0: too many lookups at once
		return
	}
	go func() {
		defer f.release()
		l.pid = f.lookup(proto, client, server)
		l.session = sessionOf(l.pid)
		close(l.done)
	}()
}

// acquire takes a lookup's token, if one is free.
func (f *pidFinder) acquire() bool {
	select {
	case f.active <- struct{}{}:
		return true
	default:
		return false
	}
}

func (f *pidFinder) release() { <-f.active }

// pid is the pid found for client and its session (sessionOf), waiting a
// moment for its lookup; 0 when none was started or found.
func (f *pidFinder) pid(client netip.AddrPort) (pid, session int) {
	if f == nil {
		return 0, 0
	}
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	f.mu.Lock()
	l := f.pending[client]
	f.mu.Unlock()
	if l == nil {
		return 0, 0
	}
	select {
	case <-l.done:
		return l.pid, l.session
	case <-time.After(lookupWaitLimit):
		return 0, 0
	}
}

// find does one lookup, at once: 0 when the process is not found, when
// maxActiveLookups are running (or f is nil).
func (f *pidFinder) find(proto string, client, server netip.AddrPort) int {
	if f == nil || !f.acquire() {
		return 0
	}
	defer f.release()
	return f.lookup(proto, client, server)
}

// lookup does one lookup, holding a token.
func (f *pidFinder) lookup(proto string, client, server netip.AddrPort) int {
	inode := f.socketInode(proto, client, server)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	descriptors := 0
	for _, pid := range f.descendants() {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if descriptors++; descriptors > maxDescriptors {
				return 0
			}
			if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && target == want {
				return pid
			}
		}
	}
	return 0
}

// sessionOf is the session a process is in, as the host numbers it: the
// pid of its leader, which for a sandbox's command is the command jail
// started (each leads a session of its own). 0 when not known.
func sessionOf(pid int) int {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0
	}
	// After the name: state, ppid, pgrp, session.
	fields := strings.Fields(s[end+1:])
	if len(fields) < 4 {
		return 0
	}
	sid, err := strconv.Atoi(fields[3])
	if err != nil {
		return 0
	}
	return sid
}

// socketInode finds the socket bound to client in the sandbox's table of
// proto ("tcp" or "udp"): for TCP the one connected to server.
func (f *pidFinder) socketInode(proto string, client, server netip.AddrPort) string {
	table, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", f.initPid, proto))
	if err != nil {
		return ""
	}
	defer table.Close()
	sc := bufio.NewScanner(table)
	sc.Scan() // the header
	for lines := 0; lines < maxSocketLines && sc.Scan(); lines++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, lok := procAddr(fields[1])
		remote, rok := procAddr(fields[2])
		if !lok || !rok || local.Port() != client.Port() {
			continue
		}
		// An unconnected UDP socket is bound to 0.0.0.0.
		if local.Addr() != client.Addr() && (proto == "tcp" || !local.Addr().IsUnspecified()) {
			continue
		}
		if proto == "tcp" && server.IsValid() && remote != server {
			continue
		}
		return fields[9]
	}
	return ""
}

// procAddr reads an IPv4 address and port as /proc/net/tcp writes them:
// the address as a 32-bit number in host (little-endian) order, in hex.
func procAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(a) != 8 {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], binary.BigEndian.Uint32(raw))
	return netip.AddrPortFrom(netip.AddrFrom4(b), uint16(port)), true
}

// descendants lists the init's descendants (not the init), breadth first,
// at most maxProcesses.
func (f *pidFinder) descendants() []int {
	var out []int
	queue := []int{f.initPid}
	for len(queue) > 0 && len(out) < maxProcesses {
		pid := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(data)) {
				if child, err := strconv.Atoi(c); err == nil {
					out = append(out, child)
					queue = append(queue, child)
				}
			}
		}
	}
	return out
}

// pidListener starts a lookup for each connection it accepts.
type pidListener struct {
	net.Listener
	finder *pidFinder
}

func (l *pidListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.finder.start("tcp", addrPortOf(c.RemoteAddr()), addrPortOf(c.LocalAddr()))
	}
	return c, err
}

// addrPortOf is a's address and port, IPv4 in its 4-byte form.
func addrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
