package api

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// maxAllocPerInputByte bounds what loading may allocate per byte of input
// (plus a fixed allowance): a valid 2 KB Rollout allocates about 60 KB.
// Alias expansion that is not bounded (billion laughs, cycles) allocates
// gigabytes from a few hundred bytes and fails this at once.
const (
	maxAllocPerInputByte = 2000
	allocAllowance       = 16 << 20
)

// FuzzLoad: no input may panic the loader, every error it reports names
// the file, and loading costs memory in proportion to the input.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	const head = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: x}\n"
	f.Add([]byte("kind: Rollout\napiVersion: argoproj.io/v1alpha1\nspec: {strategy: {canary: {steps: [{setWeight: *a}]}}}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	// Alias cycles through a merge key, a list, a map value, and two anchors.
	f.Add([]byte(head + "spec: &s {<<: *s}\n"))
	f.Add([]byte(head + "spec: {strategy: &s {canary: {steps: [*s]}}}\n"))
	f.Add([]byte(head + "spec: &s {template: *s}\n"))
	f.Add([]byte(head + "x: &a {b: &b {a: *a}}\nspec: *b\n"))
	// Exponential aliases, under an unknown field, a known list and a map.
	f.Add([]byte(head + laughs(9, 9, "spec: {bomb: *l8}\n")))
	f.Add([]byte(head + laughs(6, 10, "spec: {strategy: {canary: {steps: *l5}}}\n")))
	f.Add([]byte(head + laughs(8, 8, "spec: {template: {metadata: {labels: {a: *l7}}}}\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		set := Load([]Source{{Name: "fuzz.yaml", Data: data}})
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(allocAllowance+maxAllocPerInputByte*len(data)) {
			t.Fatalf("loading %d bytes allocated %d bytes", len(data), alloc)
		}
		for _, d := range set.Diagnostics {
			if d.File != "fuzz.yaml" {
				t.Fatalf("diagnostic without its file: %+v", d)
			}
		}
		for _, r := range set.Rollouts {
			for _, s := range r.Steps {
				_ = s.String()
			}
		}
	})
}

// laughs writes levels anchors l0..l<levels-1>, each a list of width
// aliases of the one before, then tail.
func laughs(levels, width int, tail string) string {
	var b strings.Builder
	b.WriteString("x:\n  - &l0 [" + strings.TrimSuffix(strings.Repeat("lol,", width), ",") + "]\n")
	for i := 1; i < levels; i++ {
		prev := "*l" + strconv.Itoa(i-1)
		b.WriteString("  - &l" + strconv.Itoa(i) + " [" + strings.TrimSuffix(strings.Repeat(prev+",", width), ",") + "]\n")
	}
	b.WriteString(tail)
	return b.String()
}
