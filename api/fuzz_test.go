package api

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: no input may panic the loader, and every error it reports
// names the file.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("kind: Rollout\napiVersion: argoproj.io/v1alpha1\nspec: {strategy: {canary: {steps: [{setWeight: *a}]}}}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set := Load([]Source{{Name: "fuzz.yaml", Data: data}})
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
