package testkit

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is -update on the test binary's command line: `go test ./api
// -run TestInvalidCorpus -update` rewrites that package's golden files.
var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// Updating says whether the test binary runs with -update, for a test
// that keeps golden files its own way (the chart's, compared by their
// first difference).
func Updating() bool { return *update }

// Golden compares got with the file at path. With -update it writes got
// there instead (creating the directory), to be reviewed as a diff. A
// difference or a missing file fails the test, naming the file and showing
// both contents.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it; review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
