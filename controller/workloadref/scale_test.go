package workloadref

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// TestTarget: the Deployment's replicas each scaleDown mode asks for as a
// rollout of 4 replicas comes up beside a Deployment of 3.
func TestTarget(t *testing.T) {
	const original = 3
	type want struct {
		replicas int32
		ok       bool
	}
	for _, tc := range []struct {
		name string
		mode api.ScaleDown
		p    Progress
		want want
	}{
		{"never, healthy", api.ScaleDownNever, Progress{Healthy: true, Replicas: 4, Ready: 4}, want{0, false}},
		{"onsuccess, coming up", api.ScaleDownOnSuccess, Progress{Replicas: 4, Ready: 3}, want{0, false}},
		{"onsuccess, healthy but pods missing", api.ScaleDownOnSuccess, Progress{Healthy: true, Replicas: 4, Ready: 3}, want{0, false}},
		{"onsuccess, healthy", api.ScaleDownOnSuccess, Progress{Healthy: true, Replicas: 4, Ready: 4}, want{0, true}},
		{"progressively, none ready", api.ScaleDownProgressively, Progress{Replicas: 4, Ready: 0}, want{3, true}},
		{"progressively, two ready", api.ScaleDownProgressively, Progress{Replicas: 4, Ready: 2}, want{2, true}},
		{"progressively, all ready, not healthy yet", api.ScaleDownProgressively, Progress{Replicas: 4, Ready: 4}, want{0, true}},
		{"progressively, surge above replicas", api.ScaleDownProgressively, Progress{Replicas: 4, Ready: 6}, want{0, true}},
		{"progressively, healthy", api.ScaleDownProgressively, Progress{Healthy: true, Replicas: 4, Ready: 4}, want{0, true}},
		{"progressively, lost pods", api.ScaleDownProgressively, Progress{Healthy: true, Replicas: 4, Ready: 3}, want{1, true}},
	} {
		got, ok := Target(tc.mode, original, tc.p)
		if (want{got, ok}) != tc.want {
			t.Errorf("%s: Target = %d, %v; want %d, %v", tc.name, got, ok, tc.want.replicas, tc.want.ok)
		}
	}
}
