// Command egressbench measures the egress gateway (issue 25) against a
// direct connection on loopback, in a network namespace of its own (so it
// touches nothing of the machine's network; it needs root):
//
//   - HTTPS download throughput of a large body: curl on the namespace's
//     loopback, directly, through socat (a plain TCP relay that checks
//     nothing: the peer, when installed) and from a sandbox through the
//     gateway (the proxy, and the captured port 443), and the gateway's
//     CPU time per MiB;
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
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail/test/internal/netns"
)

func main() {
	jailBin := flag.String("jail", "bin/jail", "the jail binary")
	baseBin := flag.String("base", "", "a second jail binary (say, main's) measured beside -jail, interleaved, rows marked (base)")
	rounds := flag.Int("n", 100, "start-ups of each kind, interleaved (0: none)")
	size := flag.Int("mib", 256, "MiB downloaded per throughput round")
	tputRounds := flag.Int("rounds", 5, "throughput rounds, each path once per round, interleaved")
	requests := flag.Int("requests", 200, "requests per path for the time to the first byte, spread over the rounds")
	shell := flag.String("sh", "", "instead of measuring, run this shell script in a sandbox of -jail set up as for the measures, and print what it prints; $BENCH_CA is the server's CA, "+host+" its name")
	outside := flag.Bool("outside", false, "with -sh: run the script in the namespace but outside any sandbox (as the direct path is measured: resolve "+host+" with curl's --resolve "+host+":443:"+address+")")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "egressbench: skipped: needs root (it makes a network namespace)")
		return
	}
	if err := run(*jailBin, *baseBin, *shell, *outside, *rounds, *size, max(*tputRounds, 1), max(*requests, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "egressbench:", err)
		os.Exit(1)
	}
}

const (
	host    = "bench.test"
	address = "127.0.0.2"
	// relayAddress is where the peer relay (socat) listens.
	relayAddress = "127.0.0.3"
)

// binary is a jail binary measured, and how its rows are marked.
type binary struct {
	path, mark string
}

func run(jailBin, baseBin, shell string, outside bool, rounds, mib, tputRounds, requests int) error {
	jailBin, _ = filepath.Abs(jailBin)
	bins := []binary{{jailBin, ""}}
	if baseBin != "" {
		baseBin, _ = filepath.Abs(baseBin)
		bins = append(bins, binary{baseBin, " (base)"})
	}
	dir, err := os.MkdirTemp("", "egressbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	ns, err := netns.New()
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer ns.Close()
	caFile := filepath.Join(dir, "ca.pem")
	tlsConfig, err := authority(caFile)
	if err != nil {
		return err
	}
	l, err := netns.Listen(ns, "tcp", address+":443")
	if err != nil {
		return err
	}
	body := make([]byte, 1<<20)
	// The peer relay's readiness probe connects and hangs up without TLS:
	// not worth a line.
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	// The audit log lives apart from dir: jail refuses to mount a tree
	// that holds it into a sandbox.
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
	sandbox := func(bin string, args ...string) []string {
		return append([]string{bin, "run", "--net", rules, "--mount", dir + ":/opt/bench:ro", "--"}, args...)
	}
	const cacert = "/opt/bench/ca.pem"
	if shell != "" {
		cmd := in(sandbox(jailBin, "sh", "-c", "BENCH_CA="+cacert+"; "+shell)...)
		if outside {
			cmd = in("sh", "-c", "BENCH_CA="+caFile+"; "+shell)
		}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}

	// The paths measured: direct, then each binary's proxy and captured
	// port. A path runs a shell script in which OPTS stands for curl's
	// options of the path.
	type path struct {
		name, bin, opts string
		peer            bool // a relay not jail's: no gateway CPU to read
	}
	paths := []path{{"direct (curl --resolve)", "", "--cacert " + caFile + " --resolve " + host + ":443:" + address, false}}
	// A peer in the same run: socat, a plain TCP relay that checks
	// nothing, in the namespace. What any relay costs on this machine
	// (a second TCP connection on the loopback) shows in its row.
	if socat, err := exec.LookPath("socat"); err == nil {
		relay := in(socat, "-b", "262144", "TCP-LISTEN:443,bind="+relayAddress+",reuseaddr,fork", "TCP:"+address+":443")
		relay.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := relay.Start(); err != nil {
			return fmt.Errorf("socat: %w", err)
		}
		defer func() {
			_ = syscall.Kill(-relay.Process.Pid, syscall.SIGKILL)
			_ = relay.Wait()
		}()
		if err := waitListening(in, relayAddress); err != nil {
			return err
		}
		paths = append(paths, path{"peer: socat -b 262144, a plain TCP relay", "", "--cacert " + caFile + " --resolve " + host + ":443:" + relayAddress, true})
	}
	for _, b := range bins {
		paths = append(paths,
			path{"through the proxy (CONNECT)" + b.mark, b.path, "--cacert " + cacert, false},
			path{"captured port 443" + b.mark, b.path, "--noproxy '*' --cacert " + cacert, false})
	}
	script := func(p path, tmpl string) *exec.Cmd {
		sh := strings.ReplaceAll(tmpl, "OPTS", p.opts)
		if p.bin == "" {
			return in("sh", "-c", sh)
		}
		return in(sandbox(p.bin, "sh", "-c", sh)...)
	}

	fmt.Printf("\n## Egress gateway: HTTPS on loopback, %d MiB per download (medians of %d, interleaved)\n\n", mib, tputRounds)
	// The CPU times are in clock ticks (10 ms): per MiB they are summed
	// over the rounds, not a median of coarse values.
	fmt.Println("| path | throughput | ratio to direct | gateway CPU per MiB (all rounds) | gateway CPU per second of transfer |")
	fmt.Println("|---|---|---|---|---|")
	speeds := make([][]float64, len(paths))
	cpus := make([][]float64, len(paths))
	loads := make([][]float64, len(paths))
	download := `exec curl -sS -o /dev/null -w '%{speed_download}\n' OPTS https://` + host + `/big`
	for round := 0; round < tputRounds; round++ {
		for i, p := range paths {
			cpu, out, err := withGatewayCPU(script(p, download))
			if err != nil {
				return fmt.Errorf("%s: %v: %s", p.name, err, out)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(lastLine(out)), 64)
			if err != nil {
				return fmt.Errorf("%s: %q", p.name, out)
			}
			speeds[i] = append(speeds[i], v)
			perMiB := cpu.Seconds() * 1000 / float64(mib)
			cpus[i] = append(cpus[i], perMiB)
			// CPU ms per MiB times MiB per second: the share of one core
			// the gateway took while the download ran.
			loads[i] = append(loads[i], perMiB*v/(1<<20)/1000)
		}
	}
	direct := median(speeds[0])
	for i, p := range paths {
		cpu, load := "-", "-"
		if i > 0 && !p.peer {
			sum := 0.0
			for _, v := range cpus[i] {
				sum += v
			}
			cpu = fmt.Sprintf("%.3f ms", sum/float64(len(cpus[i])))
			load = fmt.Sprintf("%.0f %% of a core", 100*median(loads[i]))
		}
		fmt.Printf("| %s | %.0f MiB/s | %.2f× | %s | %s |\n", p.name, median(speeds[i])/(1<<20), median(speeds[i])/direct, cpu, load)
	}

	fmt.Printf("\n## Egress gateway: a new HTTPS connection for a 1 MiB answer, %d requests each over %d interleaved rounds (medians)\n\n", requests, tputRounds)
	fmt.Println("TCP connected: to the server, the proxy or the captured address (the captured path's name lookup, through the sandbox's resolver, included); TLS connected: the handshake with the server done (through the proxy: after CONNECT's answer); first byte: of the answer.")
	fmt.Println()
	fmt.Println("| path | TCP connected | TLS connected | first byte | added (TLS connected) | added (first byte) |")
	fmt.Println("|---|---|---|---|---|---|")
	const fields = 3 // time_connect, time_appconnect, time_starttransfer
	times := make([][fields][]float64, len(paths))
	for round := 0; round < tputRounds; round++ {
		n := requests / tputRounds
		if round < requests%tputRounds {
			n++
		}
		if n == 0 {
			continue
		}
		loop := fmt.Sprintf(`for i in $(seq %d); do curl -sS -o /dev/null -w '%%{time_connect} %%{time_appconnect} %%{time_starttransfer}\n' OPTS https://%s/small; done`, n, host)
		for i, p := range paths {
			out, err := script(p, loop).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v: %s", p.name, err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				if len(f) != fields {
					return fmt.Errorf("%s: %q", p.name, line)
				}
				for k := range f {
					v, err := strconv.ParseFloat(f[k], 64)
					if err != nil {
						return fmt.Errorf("%s: %q", p.name, line)
					}
					times[i][k] = append(times[i][k], v*1000)
				}
			}
		}
	}
	for i, p := range paths {
		tcp, tlsDone, first := median(times[i][0]), median(times[i][1]), median(times[i][2])
		added := " | |"
		if i > 0 {
			added = fmt.Sprintf(" %+.3f ms | %+.3f ms |", tlsDone-median(times[0][1]), first-median(times[0][2]))
		}
		fmt.Printf("| %s | %.3f ms | %.3f ms | %.3f ms |%s\n", p.name, tcp, tlsDone, first, added)
	}

	if rounds == 0 {
		return nil
	}
	fmt.Printf("\n## Start-up with the gateway: jail run /bin/true, %d interleaved rounds (medians)\n\n", rounds)
	fmt.Println("| what | median | ratio to --net none |")
	fmt.Println("|---|---|---|")
	type kind struct {
		name string
		args []string
	}
	var kinds []kind
	for _, b := range bins {
		kinds = append(kinds,
			kind{"--net none" + b.mark, []string{b.path, "run", "--", "/bin/true"}},
			kind{"--net allow=" + host + b.mark, []string{b.path, "run", "--net", "allow=" + host, "--", "/bin/true"}})
	}
	starts := make([][]float64, len(kinds))
	for r := 0; r < rounds; r++ {
		for i, k := range kinds {
			cmd := exec.Command(k.args[0], k.args[1:]...)
			cmd.Env = append(os.Environ(), "JAIL_AUDIT_LOG="+filepath.Join(auditDir, "audit.log"))
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v: %s", k.name, err, out)
			}
			starts[i] = append(starts[i], float64(time.Since(start).Microseconds())/1000)
		}
	}
	for i, k := range kinds {
		none := median(starts[i-i%2])
		fmt.Printf("| jail run %s /bin/true | %.2f ms | %.2f× |\n", k.name, median(starts[i]), median(starts[i])/none)
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

// waitListening waits, up to 5 s, until something accepts connections on
// addr:443 in the namespace in runs commands in.
func waitListening(in func(args ...string) *exec.Cmd, addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if in("bash", "-c", "exec 3<>/dev/tcp/"+addr+"/443").Run() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s:443", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
