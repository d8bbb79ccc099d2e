package main

import (
	"fmt"

	"github.com/jail-sandbox/jail"
)

func checkCommand(args []string) int {
	if len(args) > 0 {
		return fail("check: takes no arguments")
	}
	features := jail.Check()
	for _, f := range features {
		fmt.Printf("%-30s %s\n", f.Name, f.Detail)
	}
	if !jail.CanRun(features) {
		fmt.Println("jail run cannot work here for this user")
		return 1
	}
	return 0
}
