package diffengine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// FuzzDiff checks two properties on arbitrary strategy files:
// diffing a loadable file against itself (loaded twice, so no pointers are
// shared) finds nothing, and diffing any two files never panics, whatever
// the live position.
func FuzzDiff(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "pairs", "*"))
	for _, d := range dirs {
		a, errA := os.ReadFile(filepath.Join(d, "old.yaml"))
		b, errB := os.ReadFile(filepath.Join(d, "new.yaml"))
		if errA == nil && errB == nil {
			f.Add(a, b, 1, int32(10))
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte, step int, weight int32) {
		load := func(data []byte) *api.Set {
			return api.Load([]api.Source{{Name: "s.yaml", Data: data}})
		}
		live := func(api.Key) Live { return Live{InFlight: true, StepIndex: step, CanaryWeight: weight} }

		for _, c := range DiffSets(load(a), load(a), live) {
			if c.Class != Unchanged || c.Risky || len(c.Changes) > 0 {
				t.Fatalf("%s against itself: %s risky=%v %v %q", c.Rollout, c.Class, c.Risky, c.Changes, c.Reasons)
			}
		}
		for _, c := range DiffSetTemplates(load(a), load(a)) {
			if c.Class != Unchanged || len(c.Changes) > 0 {
				t.Fatalf("template %s against itself: %s %v", c.Template, c.Class, c.Changes)
			}
		}

		old, new := load(a), load(b)
		DiffSets(old, new, live)
		DiffSets(new, old, nil)
		DiffSetTemplates(old, new)
		for _, r := range old.Rollouts {
			for _, s := range new.Rollouts {
				DiffRollouts(r, s, live(r.Key))
			}
		}
	})
}
