// Command egressbench measures the egress gateway (issue 25) against a
// direct connection on loopback, in a network namespace of its own (so it
// touches nothing of the machine's network; it needs root):
//
//   - HTTPS download throughput of a large body: curl on the namespace's
//     loopback, directly and from a sandbox through the gateway (the proxy,
//     and the captured port 443), and the gateway's CPU time per MiB;
//   - the time to the first byte of a small HTTPS request, directly and
//     through the gateway: the latency the gateway adds;
//   - `jail run --net allow=... /bin/true` beside `jail run --net none
//     /bin/true`, interleaved.
//
// It prints medians and ratios; `make bench` runs it.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	jailBin := flag.String("jail", "bin/jail", "the jail binary")
	rounds := flag.Int("n", 100, "start-ups of each kind, interleaved")
	size := flag.Int("mib", 256, "MiB downloaded per throughput round")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "egressbench: skipped: needs root (it makes a network namespace)")
		return
	}
	if err := run(*jailBin, *rounds, *size); err != nil {
		fmt.Fprintln(os.Stderr, "egressbench:", err)
		os.Exit(1)
	}
}

const (
	host    = "bench.test"
	address = "127.0.0.2"
)

func run(jailBin string, rounds, mib int) error {
	jailBin, _ = filepath.Abs(jailBin)
	dir, err := os.MkdirTemp("", "egressbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	ns, err := newNetns()
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer ns.Close()
	caFile := filepath.Join(dir, "ca.pem")
	tlsConfig, err := authority(caFile)
	if err != nil {
		return err
	}
	l, err := listenIn(ns, address+":443")
	if err != nil {
		return err
	}
	body := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if r.URL.Path == "/big" {
			n = mib
		}
		w.Header().Set("Content-Length", strconv.Itoa(n<<20))
		for i := 0; i < n; i++ {
			if _, err := w.Write(body); err != nil {
				return
			}
		}
	})}
	go func() { _ = srv.Serve(tls.NewListener(l, tlsConfig)) }()
	defer srv.Close()
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+address+" "+host+"\n"), 0o644); err != nil {
		return err
	}
	// The audit log is jail's state: no directory holding it may be
	// mounted into a sandbox, so it is apart from dir.
	auditDir, err := os.MkdirTemp("", "egressbench-audit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(auditDir)
	// Everything runs in the namespace, with its hosts file.
	in := func(args ...string) *exec.Cmd {
		script := `mount --bind "$1" /etc/hosts && shift && exec "$@"`
		full := append([]string{fmt.Sprintf("--net=/proc/%d/fd/%d", os.Getpid(), ns.Fd()), "unshare", "-m", "sh", "-c", script, "sh", hosts}, args...)
		cmd := exec.Command("nsenter", full...)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile, "JAIL_AUDIT_LOG="+filepath.Join(auditDir, "audit.log"))
		return cmd
	}
	rules := "allow=" + host + "," + address
	sandbox := func(args ...string) []string {
		return append([]string{jailBin, "run", "--net", rules, "--mount", dir + ":/opt/bench:ro", "--"}, args...)
	}
	const cacert = "/opt/bench/ca.pem"

	fmt.Printf("\n## Egress gateway: HTTPS on loopback, %d MiB per download (medians of 5)\n\n", mib)
	fmt.Println("| path | throughput | ratio to direct | gateway CPU per MiB |")
	fmt.Println("|---|---|---|---|")
	curl := func(extra ...string) []string {
		return append([]string{"curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}\\n"}, extra...)
	}
	type path struct {
		name string
		cmd  func() *exec.Cmd
	}
	paths := []path{
		{"direct (curl --resolve)", func() *exec.Cmd {
			return in(curl("--cacert", caFile, "--resolve", host+":443:"+address, "https://"+host+"/big")...)
		}},
		{"through the proxy (CONNECT)", func() *exec.Cmd {
			return in(sandbox(curl("--cacert", cacert, "https://"+host+"/big")...)...)
		}},
		{"captured port 443", func() *exec.Cmd {
			return in(sandbox(curl("--noproxy", "*", "--cacert", cacert, "https://"+host+"/big")...)...)
		}},
	}
	speeds := make([][]float64, len(paths))
	cpus := make([][]float64, len(paths))
	for round := 0; round < 5; round++ {
		for i, p := range paths {
			cmd := p.cmd()
			cpu, out, err := withGatewayCPU(cmd)
			if err != nil {
				return fmt.Errorf("%s: %v: %s", p.name, err, out)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(lastLine(out)), 64)
			if err != nil {
				return fmt.Errorf("%s: %q", p.name, out)
			}
			speeds[i] = append(speeds[i], v)
			cpus[i] = append(cpus[i], cpu.Seconds()*1000/float64(mib))
		}
	}
	direct := median(speeds[0])
	for i, p := range paths {
		cpu := "-"
		if i > 0 {
			cpu = fmt.Sprintf("%.2f ms", median(cpus[i]))
		}
		fmt.Printf("| %s | %.0f MiB/s | %.2f× | %s |\n", p.name, median(speeds[i])/(1<<20), median(speeds[i])/direct, cpu)
	}

	fmt.Println("\n## Egress gateway: time to the first byte of a 1 MiB HTTPS answer, 200 requests each (medians)")
	fmt.Println()
	fmt.Println("| path | median | added |")
	fmt.Println("|---|---|---|")
	loop := func(extra string) string {
		return fmt.Sprintf(`for i in $(seq 200); do curl -sS -o /dev/null -w '%%{time_starttransfer}\n' %s https://%s/small; done`, extra, host)
	}
	firsts := []struct {
		name string
		cmd  *exec.Cmd
	}{
		{"direct", in("sh", "-c", loop("--cacert "+caFile+" --resolve "+host+":443:"+address))},
		{"through the proxy (CONNECT)", in(sandbox("sh", "-c", loop("--cacert "+cacert))...)},
		{"captured port 443", in(sandbox("sh", "-c", loop("--noproxy '*' --cacert "+cacert))...)},
	}
	var base float64
	for i, f := range firsts {
		out, err := f.cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", f.name, err, out)
		}
		var ts []float64
		for _, l := range strings.Fields(string(out)) {
			if v, err := strconv.ParseFloat(l, 64); err == nil {
				ts = append(ts, v*1000)
			}
		}
		m := median(ts)
		if i == 0 {
			base = m
			fmt.Printf("| %s | %.3f ms | |\n", f.name, m)
			continue
		}
		fmt.Printf("| %s | %.3f ms | %+.3f ms |\n", f.name, m, m-base)
	}

	fmt.Printf("\n## Start-up with the gateway: jail run /bin/true, %d interleaved rounds (medians)\n\n", rounds)
	fmt.Println("| what | median | ratio to --net none |")
	fmt.Println("|---|---|---|")
	kinds := []struct {
		name string
		args []string
	}{
		{"--net none", []string{jailBin, "run", "--", "/bin/true"}},
		{"--net allow=" + host, []string{jailBin, "run", "--net", "allow=" + host, "--", "/bin/true"}},
	}
	times := make([][]float64, len(kinds))
	for r := 0; r < rounds; r++ {
		for i, k := range kinds {
			cmd := exec.Command(k.args[0], k.args[1:]...)
			cmd.Env = append(os.Environ(), "JAIL_AUDIT_LOG="+filepath.Join(auditDir, "audit.log"))
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v: %s", k.name, err, out)
			}
			times[i] = append(times[i], float64(time.Since(start).Microseconds())/1000)
		}
	}
	for i, k := range kinds {
		fmt.Printf("| jail run %s /bin/true | %.2f ms | %.2f× |\n", k.name, median(times[i]), median(times[i])/median(times[0]))
	}
	return nil
}

// withGatewayCPU runs cmd and returns the CPU time (user and system) of
// the gateway programs it started, read from /proc just before each ends.
// The gateway's own CPU is what it spent relaying: it is alone in its
// process.
func withGatewayCPU(cmd *exec.Cmd) (time.Duration, string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	var total time.Duration
	seen := map[int]time.Duration{}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			for pid, cpu := range gatewayCPU() {
				seen[pid] = cpu
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-finished
	for _, cpu := range seen {
		total += cpu
	}
	return total, out.String(), err
}

// gatewayCPU is the CPU time of each running gateway program.
func gatewayCPU() map[int]time.Duration {
	out := map[int]time.Duration{}
	entries, _ := os.ReadDir("/proc")
	tick := float64(100) // USER_HZ
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), "jail:gateway") {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[pid] = time.Duration((utime + stime) / tick * float64(time.Second))
	}
	return out
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// authority makes a CA (written to caFile) and a server configuration for
// host signed by it.
func authority(caFile string) (*tls.Config, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egressbench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

// newNetns makes a network namespace with its loopback up, from a thread
// that returns to this process's own.
func newNetns() (*os.File, error) {
	type answer struct {
		ns  *os.File
		err error
	}
	done := make(chan answer, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer self.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- answer{err: err}
			return
		}
		ns, err := os.Open("/proc/thread-self/ns/net")
		if err == nil {
			err = loopbackUp()
		}
		if serr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); serr != nil {
			done <- answer{err: serr}
			return
		}
		runtime.UnlockOSThread()
		done <- answer{ns: ns, err: err}
	}()
	a := <-done
	return a.ns, a.err
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// listenIn listens on addr inside the namespace ns.
func listenIn(ns *os.File, addr string) (net.Listener, error) {
	type answer struct {
		l   net.Listener
		err error
	}
	done := make(chan answer, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- answer{err: err}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- answer{err: err}
			return
		}
		runtime.UnlockOSThread()
		done <- answer{l: l, err: lerr}
	}()
	a := <-done
	return a.l, a.err
}
