package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// event is the part of a `go test -json` line (cmd/test2json) read here.
type event struct {
	Action  string
	Package string
	Test    string
}

// counts is one test's record over all runs.
type counts struct{ runs, failures int }

// tally counts runs and failures per test across runs.
type tally map[string]*counts

// addRun reads one `go test -json` output. A test is "package.TopLevel"
// (a subtest counts in its parent); a package that failed with no failed
// test in it (build error, panic outside a test, timeout) counts as
// "package (package)".
func (t tally) addRun(r io.Reader) error {
	result := map[string]string{}      // test → pass or fail, in this run
	pkgFailed := map[string]bool{}     // package → failed as a whole
	pkgTestFailed := map[string]bool{} // package → a test of it failed
	pkgs := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Package == "" {
			continue // go test's own lines (build output) are not events
		}
		pkgs[ev.Package] = true
		if ev.Action != "pass" && ev.Action != "fail" {
			continue
		}
		if ev.Test == "" {
			pkgFailed[ev.Package] = pkgFailed[ev.Package] || ev.Action == "fail"
			continue
		}
		name := ev.Package + "." + strings.SplitN(ev.Test, "/", 2)[0]
		if ev.Action == "fail" {
			result[name] = "fail"
			pkgTestFailed[ev.Package] = true
		} else if result[name] == "" {
			result[name] = "pass"
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read go test -json: %w", err)
	}
	for name, res := range result {
		t.add(name, res == "fail")
	}
	for pkg := range pkgs {
		t.add(pkg+" (package)", pkgFailed[pkg] && !pkgTestFailed[pkg])
	}
	return nil
}

func (t tally) add(name string, failed bool) {
	c := t[name]
	if c == nil {
		c = &counts{}
		t[name] = c
	}
	c.runs++
	if failed {
		c.failures++
	}
}

// write prints the table (failed tests only unless all) and the total
// (runs of tests; failures of tests and packages), and returns the number
// of failed runs.
func (t tally) write(w io.Writer, all bool) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "test\truns\tfailures\tflake rate")
	runs, failures, flaky, tests := 0, 0, 0, 0
	for _, name := range slices.Sorted(maps.Keys(t)) {
		c := t[name]
		failures += c.failures
		if !strings.HasSuffix(name, " (package)") {
			tests++
			runs += c.runs
		}
		if c.failures > 0 {
			flaky++
		}
		if all || c.failures > 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\n", name, c.runs, c.failures, 100*float64(c.failures)/float64(c.runs))
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "total: %d tests, %d runs, %d failures, %d flaked\n", tests, runs, failures, flaky)
	return failures
}
