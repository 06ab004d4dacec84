package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// BenchmarkScaleTo20Ready measures, on the real control plane, one Scale
// of a new 20-pod canary and the time from its pods being bound (by the
// benchmark, as sluice's scheduler would) until OnReady says 20/20: kwok's
// Ready, the ReplicaSet controller's status and sluice's informers.
//
//	go test -run '^$' -bench BenchmarkScaleTo20Ready -benchtime 5x ./controller/workload/
func BenchmarkScaleTo20Ready(b *testing.B) {
	e := newEnv(b)
	var scale, ready time.Duration
	i := 0
	for b.Loop() {
		name, hash := fmt.Sprintf("co%d", i), fmt.Sprintf("h%d", i)
		i++
		t0 := time.Now()
		e.scale(e.key(name), set(rollout.RoleCanary, hash, 20, testRollout(e.ns, name, "shop/co:v2", 20, 8080, nil)))
		scale += time.Since(t0)
		e.bindPods(hash, 20, 0)
		t1 := time.Now()
		e.waitReady(hash, rollout.PodsReady{Hash: hash, Replicas: 20, Ready: 20})
		ready += time.Since(t1)
	}
	b.ReportMetric(float64(scale.Milliseconds())/float64(i), "scale-ms/op")
	b.ReportMetric(float64(ready.Milliseconds())/float64(i), "bound-to-ready-ms/op")
}
