package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// claimant is a Rollout in namespace ns on host web.test whose only
// version, image, is served by that version's real backend.
func (w *world) claimant(ns, image string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: %s}
spec:
  template:
    spec:
      containers: [{name: app, image: "%s"}]
  strategy:
    canary:
      steps:
      - setWeight: 30
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: web.test
            endpoints:
              "%s": ["%s"]
`, ns, image, image, w.backends[image])
}

// waitRefused waits until key's status carries the host error naming owner.
func (r *running) waitRefused(t *testing.T, key api.Key, owner api.Key) {
	t.Helper()
	r.waitStatusOf(t, key, "refused for its host", func(s rollout.Status) bool {
		for _, e := range s.Errors {
			if e.Field == api.HostField && strings.Contains(e.Message, `host "web.test" is owned by rollout `+owner.String()) {
				return true
			}
		}
		return false
	})
}

// TestHostOwnerHoldsAcrossRestarts: finding N3. A second rollout, in a
// namespace that sorts first, claims default/web's host with its own
// endpoints. It is refused (status error at its host field, strategy
// invalid) and, over several restarts of the daemon on the same state,
// real gRPC xDS clients never reach its backend: the owner is the rollout
// that held the host first, not whichever republishes first. Before, the
// intruder's spec came into force, and after a restart it won the host
// about half of the time.
func TestHostOwnerHoldsAcrossRestarts(t *testing.T) {
	w := newWorld(t)
	intruder := api.Key{Namespace: "attacker", Name: "web"}
	w.push("owner", map[string]string{"web.yaml": w.claimant("default", "web:v1")})
	r := w.start()
	r.waitStatus(t, "owner healthy", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
	w.push("intruder", map[string]string{"intruder.yaml": w.claimant("attacker", "web:v2")})
	r.waitRefused(t, intruder, key)
	for restart := range 4 {
		if got := r.clientSplit(t, 200); got["web:v2"] > 0 || got["web:v1"] == 0 {
			t.Fatalf("after %d restarts: clients answered by %v; want web:v1 (the owner) only", restart, got)
		}
		if owner, ok := r.d.Runner().HostOwner("web.test"); !ok || owner != key {
			t.Fatalf("after %d restarts: host owner %v (%v), want %s", restart, owner, ok, key)
		}
		r.stop()
		r = w.start()
		r.waitStatus(t, "owner healthy", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
		r.waitRefused(t, intruder, key)
	}
}

// TestHostTieGoesByKey: two rollouts claiming a host nobody held, in one
// commit: the first by namespace/name owns it, the other is refused.
func TestHostTieGoesByKey(t *testing.T) {
	w := newWorld(t)
	first := api.Key{Namespace: "attacker", Name: "web"}
	w.push("both", map[string]string{
		"web.yaml":      w.claimant("default", "web:v1"),
		"intruder.yaml": w.claimant("attacker", "web:v2"),
	})
	r := w.start()
	r.waitStatusOf(t, first, "first claimant healthy", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
	r.waitRefused(t, key, first)
	if got := r.clientSplit(t, 200); got["web:v1"] > 0 {
		t.Fatalf("clients answered by %v; want web:v2 (attacker/web, first by namespace/name) only", got)
	}
}
