package rollout

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt scenario scripts")

func init() {
	flag.BoolVar(rewrite, "update", false, "same as -rewrite")
}

// TestInteraction replays every script in testdata/: lines "> cmd" are
// run, the lines after each are what it did; comments (#) and blank lines
// are kept. With -rewrite the expected output is regenerated; review it as
// a diff.
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario scripts in testdata/")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := replay(t, string(data))
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(data) {
				t.Errorf("%s: output differs (run with -rewrite and review the diff):\n%s", file, diffLines(string(data), got))
			}
		})
	}
}

// replay runs the commands of a script and returns the script with each
// command's output written after it.
func replay(t *testing.T, script string) string {
	t.Helper()
	h := newHarness()
	var b strings.Builder
	for n, line := range strings.Split(strings.TrimRight(script, "\n"), "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, "> "):
			b.WriteString(line + "\n")
			out, err := h.run(strings.TrimPrefix(line, "> "))
			if err != nil {
				t.Fatalf("line %d: %s: %v", n+1, line, err)
			}
			if err := checkInvariants(h.state); err != nil {
				t.Errorf("line %d: %s: invariant: %v", n+1, line, err)
			}
			for _, o := range out {
				b.WriteString(o + "\n")
			}
		}
		// Any other line is previous output: regenerated above.
	}
	return b.String()
}

// diffLines shows the first differing lines of two texts.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return ""
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
