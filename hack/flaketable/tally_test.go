package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTally(t *testing.T) {
	tests := []struct {
		name         string
		files        []string
		all          bool
		wantFailures int
		wantLines    []string // each must appear in the output
		wantAbsent   []string
	}{
		{
			name:         "failed tests and packages over two runs",
			files:        []string{"run-1.json", "run-2.json"},
			wantFailures: 2,
			wantLines: []string{
				"example.com/a.TestFlaky 2 1 50.0%",
				"example.com/b (package) 2 1 50.0%",
				"total: 2 tests, 4 runs, 2 failures, 2 flaked",
			},
			// A failing subtest counts in its parent; a package that failed
			// because a test failed is not a second failure.
			wantAbsent: []string{"TestFlaky/sub", "example.com/a (package)", "TestOK", "TestSkipped"},
		},
		{
			name: "all rows", files: []string{"run-2.json"}, all: true,
			wantLines: []string{"example.com/a.TestOK", "total: 2 tests, 2 runs, 0 failures, 0 flaked"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tally{}
			for _, f := range tt.files {
				if err := addFile(tl, filepath.Join("testdata", f)); err != nil {
					t.Fatal(err)
				}
			}
			var b strings.Builder
			if got := tl.write(&b, tt.all); got != tt.wantFailures {
				t.Errorf("failures = %d, want %d", got, tt.wantFailures)
			}
			// Columns are padded: compare with single spaces.
			out := strings.Join(strings.Fields(b.String()), " ")
			for _, l := range tt.wantLines {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q:\n%s", l, b.String())
				}
			}
			for _, l := range tt.wantAbsent {
				if strings.Contains(out, l) {
					t.Errorf("output has %q:\n%s", l, b.String())
				}
			}
		})
	}
}
