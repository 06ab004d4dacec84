package api

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// openCountFS counts the files opened for reading, to prove that a file
// over the size limit is never read.
type openCountFS struct {
	fs.FS
	opened map[string]int
}

func (o openCountFS) Open(name string) (fs.File, error) {
	if isStrategyFile(name) {
		o.opened[name]++
	}
	return o.FS.Open(name)
}

func TestLoadFSLimits(t *testing.T) {
	small := []byte("# nothing\n")
	sixty := []byte(strings.Repeat("#", 59) + "\n")
	many := func(n int) fstest.MapFS {
		m := fstest.MapFS{}
		for i := range n {
			m[fmt.Sprintf("r/f%05d.yaml", i)] = &fstest.MapFile{Data: small}
		}
		return m
	}
	tests := []struct {
		name        string
		fsys        fstest.MapFS
		limits      Limits
		refused     bool
		file        string // the file the error names
		message     string
		unreadable  []string
		neverOpened string
	}{
		{
			name:        "file over the default size limit is reported and never read",
			fsys:        fstest.MapFS{"big.yaml": {Data: make([]byte, DefaultMaxFileBytes+1)}, "ok.yaml": {Data: small}},
			file:        "big.yaml",
			message:     "file is 1048577 bytes, over the limit of 1048576 bytes per strategy file",
			unreadable:  []string{"big.yaml"},
			neverOpened: "big.yaml",
		},
		{
			name:    "more files than the default limit refuse the tree",
			fsys:    many(DefaultMaxFiles + 1),
			refused: true,
			file:    fmt.Sprintf("r/f%05d.yaml", DefaultMaxFiles),
			message: "more than 20000 strategy files in this revision",
		},
		{
			name:    "more bytes than the revision limit refuse the tree",
			fsys:    fstest.MapFS{"a.yaml": {Data: sixty}, "b.yaml": {Data: sixty}},
			limits:  Limits{MaxRevisionBytes: 100},
			refused: true,
			file:    "b.yaml",
			message: "exceed 100 bytes with this file",
		},
		{
			name:   "negative limits turn them off",
			fsys:   fstest.MapFS{"a.yaml": {Data: sixty}, "b.yaml": {Data: sixty}},
			limits: Limits{MaxRevisionBytes: -1, MaxFileBytes: -1, MaxFiles: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := openCountFS{FS: tt.fsys, opened: map[string]int{}}
			set, err := NewLoader(tt.limits).LoadFS(fsys, ".")
			if err != nil {
				t.Fatal(err)
			}
			if set.Refused != tt.refused {
				t.Fatalf("Refused = %v, want %v; diagnostics:\n%s", set.Refused, tt.refused, diagnosticText(set.Diagnostics))
			}
			if tt.message == "" {
				if set.Diagnostics.HasErrors() {
					t.Fatalf("unexpected errors:\n%s", diagnosticText(set.Diagnostics))
				}
				return
			}
			errs := set.Diagnostics.Errors()
			if len(errs) != 1 || errs[0].File != tt.file || !strings.Contains(errs[0].Message, tt.message) {
				t.Fatalf("errors:\n%s\nwant one on %s saying %q", diagnosticText(errs), tt.file, tt.message)
			}
			if strings.Join(set.Unreadable, ",") != strings.Join(tt.unreadable, ",") {
				t.Errorf("Unreadable = %v, want %v", set.Unreadable, tt.unreadable)
			}
			if tt.neverOpened != "" && fsys.opened[tt.neverOpened] > 0 {
				t.Errorf("%s was opened %d times; a file over the limit must not be read", tt.neverOpened, fsys.opened[tt.neverOpened])
			}
		})
	}
}

// TestLoaderOversizedFileNotCached: a file that grew over the limit is
// refused, not served from the Loader's cache of its earlier bytes.
func TestLoaderOversizedFileNotCached(t *testing.T) {
	l := NewLoader(Limits{MaxFileBytes: 2000})
	good := repo1000(1)
	set, err := l.LoadFS(good, ".")
	if err != nil || len(set.Rollouts) != 1 {
		t.Fatalf("good tree: %v, %d rollouts", err, len(set.Rollouts))
	}
	for name, f := range good {
		good[name] = &fstest.MapFile{Data: append([]byte(strings.Repeat("#\n", 1000)), f.Data...)}
	}
	set, err = l.LoadFS(good, ".")
	if err != nil || len(set.Rollouts) != 0 || len(set.Unreadable) != len(good) {
		t.Fatalf("oversized: %v, %d rollouts, unreadable %v", err, len(set.Rollouts), set.Unreadable)
	}
}
