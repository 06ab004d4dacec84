package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records failures instead of ending the
// test, so Golden's verdicts can be checked.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

func TestGolden(t *testing.T) {
	tests := []struct {
		name     string
		existing string // "" = no golden file
		got      string
		update   bool
		wantFail bool
		wantFile string // content after the call
	}{
		{name: "equal", existing: "a\n", got: "a\n", wantFile: "a\n"},
		{name: "differs", existing: "a\n", got: "b\n", wantFail: true, wantFile: "a\n"},
		{name: "missing", got: "a\n", wantFail: true},
		{name: "update rewrites", existing: "a\n", got: "b\n", update: true, wantFile: "b\n"},
		{name: "update creates the directory", got: "b\n", update: true, wantFile: "b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "testdata", "x.golden")
			if tt.existing != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			defer func(old bool) { *update = old }(*update)
			*update = tt.update
			r := &recorder{TB: t}
			Golden(r, path, []byte(tt.got))
			if failed := len(r.failed) > 0; failed != tt.wantFail {
				t.Errorf("failed = %v (%q), want %v", failed, r.failed, tt.wantFail)
			}
			content, _ := os.ReadFile(path)
			if string(content) != tt.wantFile {
				t.Errorf("file holds %q, want %q", content, tt.wantFile)
			}
		})
	}
}
