package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

const netUsage = `usage: jail net check [--json] RULES HOST[:PORT]

Says whether the egress rules RULES, as --net allow=RULES takes them
(comma-separated; '' denies everything), let a sandbox reach HOST on PORT
(default 443), which rule decides, and why. Exit 0 if allowed, 1 if denied.

  example.com      that name only          *.example.com   its subdomains
  **.example.com   the name and subdomains  NAME:PORT       only that port
                                                           (default 80 and 443)
  1.2.3.4, 10.0.0.0/8, [2001:db8::/32]:443   addresses: the only way to reach
                                             an IP address or a private range
  !RULE            deny; a deny rule wins (without a port: every port)
`

// netCheckAnswer is jail net check --json's answer.
type netCheckAnswer struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason"`
}

// netCommand is jail net: egress rules, checked offline. It is the tools
// program's, not jail's: the public suffix list's package links net/http,
// whose initialisation would cost every start of jail 0.6 ms.
func netCommand(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, netUsage)
		return fail("net: which subcommand? (check)")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Print(netUsage)
		return 0
	case "check":
		return netCheck(args[1:])
	}
	return fail("net: unknown subcommand %q (check)", args[0])
}

// netCheck is jail net check [--json] RULES HOST[:PORT]. Options may come
// anywhere before --: neither a rule nor a host starts with a dash.
func netCheck(args []string) int {
	var asJSON bool
	var operands []string
	options := true
	for _, a := range args {
		switch {
		case options && a == "--":
			options = false
		case options && (a == "--json" || a == "-json"):
			asJSON = true
		case options && (a == "-h" || a == "--help"):
			fmt.Print(netUsage)
			return 0
		case options && strings.HasPrefix(a, "-"):
			return fail("net check: unknown option %s (see 'jail net --help')", a)
		default:
			operands = append(operands, a)
		}
	}
	if len(operands) != 2 {
		return fail("net check: usage: jail net check [--json] RULES HOST[:PORT]")
	}
	list, err := rules.Parse(operands[0])
	if err != nil {
		return fail("net check: %v", err)
	}
	host, port, err := rules.SplitHostPort(operands[1], 443)
	if err != nil {
		return fail("net check: host %v", err)
	}
	host, err = rules.CanonicalHost(host)
	if err != nil {
		return fail("net check: %v", err)
	}
	d := list.Decide(host, port)
	code := 1
	if d.Allowed {
		code = 0
	}
	if asJSON {
		out, err := json.Marshal(netCheckAnswer{Host: host, Port: port, Allowed: d.Allowed, Rule: d.Rule, Reason: d.Reason})
		if err != nil {
			return fail("net check: %v", err)
		}
		fmt.Println(string(out))
		return code
	}
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	if d.Rule == "" {
		fmt.Printf("%s: %s (%s)\n", verdict, target, d.Reason)
	} else {
		fmt.Printf("%s: %s by %s: %s\n", verdict, target, d.Rule, d.Reason)
	}
	return code
}
