package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestValidateHostileFiles: each hostile strategy file makes `sluice
// validate` exit 1 with a file:line: field: reason line, never crash or
// expand it.
func TestValidateHostileFiles(t *testing.T) {
	const corpus = "../../api/testdata/invalid/"
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	many := filepath.Join(dir, "many")
	if err := os.Mkdir(many, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%03d.yaml", i)), []byte("# nothing\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		want string // regexp of one output line
	}{
		{"alias cycle", []string{corpus + "alias-cycle.yaml"},
			`^\.\./\.\./api/testdata/invalid/alias-cycle\.yaml:5: spec: alias \*s refers to a node that contains it \(anchor &s\): an alias cycle is refused$`},
		{"alias cycle in a list", []string{corpus + "alias-cycle-list.yaml"},
			`^\.\./\.\./api/testdata/invalid/alias-cycle-list\.yaml:6: spec\.loop\[0\]: alias \*l .*an alias cycle is refused$`},
		{"billion laughs", []string{corpus + "billion-laughs.yaml"},
			`^\.\./\.\./api/testdata/invalid/billion-laughs\.yaml:8: d\[2\]: alias \*c expands too far: .*excessive aliasing is refused$`},
		{"file over the default size limit", []string{big},
			`^` + regexp.QuoteMeta(big) + `: file is 2097155 bytes, over the limit of 1048576 bytes per strategy file \(--strategy-max-file-bytes\): not read$`},
		{"file over a lowered size limit", []string{"--strategy-max-file-bytes", "100", corpus + "alias-cycle.yaml"},
			`alias-cycle\.yaml: file is \d+ bytes, over the limit of 100 bytes`},
		{"more files than the limit", []string{"--strategy-max-files", "100", many},
			`^` + regexp.QuoteMeta(filepath.Join(many, "f100.yaml")) + `: more than 100 strategy files in this revision \(--strategy-max-files\): the revision is not loaded$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runClientCmd(context.Background(), append([]string{"validate"}, tt.args...)...)
			if code := cliExitCode(err); code != 1 {
				t.Errorf("exit %d (%v), want 1", code, err)
			}
			if !regexp.MustCompile(`(?m)` + tt.want).MatchString(out.String()) {
				t.Errorf("output:\n%s\nwant a line matching %s", out, tt.want)
			}
		})
	}
}
