// Command flaketable reads `go test -json` output files, one per test run
// (hack/soak.sh writes them), and prints how often each test failed: one
// row per test with its runs, failures and flake rate, then a total. It
// exits 1 when any run failed, 2 when the input cannot be read.
//
//	go run ./hack/flaketable [-all] run-1.json run-2.json ...
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	all := flag.Bool("all", false, "print every test, not only those that failed")
	flag.Parse()
	t := tally{}
	for _, name := range flag.Args() {
		if err := addFile(t, name); err != nil {
			fmt.Fprintln(os.Stderr, "flaketable:", err)
			os.Exit(2)
		}
	}
	failures := t.write(os.Stdout, *all)
	if failures > 0 {
		os.Exit(1)
	}
}

func addFile(t tally, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return t.addRun(f)
}
