package workload

import (
	"maps"

	"github.com/sluice-dev/sluice/api"
)

// ResolveTraffic fills the endpoints of a Kubernetes-mode Traffic from the
// cluster: StableEndpoints and CanaryEndpoints become Endpoints of
// StableWorkload and CanaryWorkload (and BaselineEndpoints of
// BaselineWorkload), and EndpointZones their zones. A side
// with no workload hash keeps what it had (standalone mode). The runner
// calls it before every publish, and again on OnEndpoints.
func (m *Manager) ResolveTraffic(t api.Traffic) api.Traffic {
	zones := map[string]string{}
	resolve := func(hash string, eps *[]string) {
		if hash == "" {
			return
		}
		addrs, z := m.Endpoints(t.Rollout, hash)
		*eps = addrs
		maps.Copy(zones, z)
	}
	resolve(t.StableWorkload, &t.StableEndpoints)
	resolve(t.CanaryWorkload, &t.CanaryEndpoints)
	resolve(t.BaselineWorkload, &t.BaselineEndpoints)
	if t.StableWorkload != "" || t.CanaryWorkload != "" {
		t.EndpointZones = zones
	}
	return t
}
