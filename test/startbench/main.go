// Command startbench times whole commands, interleaved round by round so
// that machine noise falls on every contender alike, and prints the median
// and p90 wall time of each and its ratio to the first one's median.
//
//	go run ./test/startbench -n 300 -- 'jail run -- /bin/true' 'bwrap --unshare-all ... /bin/true'
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

type stats struct {
	Command  string  `json:"command"`
	MedianMS float64 `json:"median_ms"`
	P90MS    float64 `json:"p90_ms"`
	Ratio    float64 `json:"ratio_to_first"`
	Runs     int     `json:"runs"`
}

func main() {
	rounds := flag.Int("n", 200, "rounds; each runs every command once")
	warmup := flag.Int("warmup", 10, "untimed rounds first")
	jsonOut := flag.String("json", "", "also write the figures to this file")
	flag.Parse()
	cmds := flag.Args()
	if len(cmds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: startbench [-n N] [-json FILE] -- 'CMD ARGS' ...")
		os.Exit(2)
	}
	times := make([][]time.Duration, len(cmds))
	for r := 0; r < *warmup+*rounds; r++ {
		for i, c := range cmds {
			start := time.Now()
			cmd := exec.Command("sh", "-c", "exec "+c)
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", c, err, out)
				os.Exit(1)
			}
			if r >= *warmup {
				times[i] = append(times[i], time.Since(start))
			}
		}
	}
	var all []stats
	for i, c := range cmds {
		ts := times[i]
		sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
		all = append(all, stats{Command: c, Runs: len(ts),
			MedianMS: ms(ts[len(ts)/2]), P90MS: ms(ts[len(ts)*9/10])})
	}
	fmt.Printf("%-9s %-9s %-7s %s\n", "median", "p90", "ratio", "command")
	for i := range all {
		all[i].Ratio = all[i].MedianMS / all[0].MedianMS
		fmt.Printf("%-9s %-9s %-7s %s\n", fmt.Sprintf("%.2fms", all[i].MedianMS), fmt.Sprintf("%.2fms", all[i].P90MS),
			fmt.Sprintf("%.2fx", all[i].Ratio), strings.TrimSpace(all[i].Command))
	}
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*jsonOut, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
