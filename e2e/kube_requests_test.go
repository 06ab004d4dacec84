package e2e

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestKubeAPIRequestsPerRollout counts, by sluice_kube_api_requests_total,
// the requests sluice sends the apiserver for one one-replica canary
// rollout (setWeight 20 → pause): from the push of v2 to Paused with the
// canary's pod Running, and from promote to Healthy with the old stable
// scaled to 0. It logs the counts by verb and resource (docs/scale.md,
// "API requests per rollout") and fails if a step costs more than it did
// when measured, so that a new read-before-write shows.
func TestKubeAPIRequestsPerRollout(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	spec := kubeRollout{Name: "kq", Namespace: ns, Host: "kq.e2e", Version: v1, Replicas: 1,
		Steps: "- setWeight: 20\n- pause: {}\n", Canary: "scaleDownDelaySeconds: 1\n"}
	repo, d := kubeStart(t, c, spec, nil)
	waitReplicaSet(t, c, ns, "kq", v1, 1, 60*time.Second)
	settle := func() { time.Sleep(2 * time.Second) } // let informer-driven writes of the last step land
	settle()

	before, plansBefore := d.kubeRequests(), d.scalePlans()
	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kq.yaml": spec.yaml()})
	d.waitStatus(ns+"/kq", 60*time.Second, "paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	waitReplicaSet(t, c, ns, "kq", v2, 1, 60*time.Second)
	settle()
	paused, plansPaused := d.kubeRequests(), d.scalePlans()

	d.cli("promote", ns+"/kq")
	d.waitStatus(ns+"/kq", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	waitReplicaSet(t, c, ns, "kq", v1, 0, 60*time.Second)
	settle()
	healthy, plansHealthy := d.kubeRequests(), d.scalePlans()

	toPaused, toHealthy := diffCounts(before, paused), diffCounts(paused, healthy)
	apiPaused, apiHealthy := plansPaused["api"]-plansBefore["api"], plansHealthy["api"]-plansPaused["api"]
	hashPaused, hashHealthy := plansPaused["cache+hashes"]-plansBefore["cache+hashes"], plansHealthy["cache+hashes"]-plansPaused["cache+hashes"]
	t.Logf("push → Paused (%v requests, %v Scales planned from the API, %v from the cache and the new hash):\n%s", total(toPaused), apiPaused, hashPaused, table(toPaused))
	t.Logf("promote → Healthy, old stable at 0 (%v requests, %v Scales planned from the API):\n%s", total(toHealthy), apiHealthy, table(toHealthy))
	// Push → Paused: the new canary's first Scale plans from the cache and
	// one list by its hash (to adopt). Promote → Healthy: the scale-down
	// that retires the old stable plans from the API (two lists). A Scale
	// whose rollout's last write the informer has not delivered yet plans
	// from the API too (PodsReady can come within milliseconds of the
	// canary's apply): it costs its two lists, allowed here, and nothing
	// else.
	for _, p := range []struct {
		what        string
		counts      map[string]float64
		most        float64
		api, hashes float64
		wantAPI     float64
	}{{"push → Paused", toPaused, maxToPaused, apiPaused, hashPaused, 0}, {"promote → Healthy", toHealthy, maxToHealthy, apiHealthy, hashHealthy, 1}} {
		lagged := max(p.api-p.wantAPI, 0)
		if n := total(p.counts); n > p.most+2*lagged {
			t.Errorf("%s: %v requests, more than the %v measured (docs/scale.md) plus 2 for each of %v Scales the cache lagged", p.what, n, p.most, lagged)
		}
		// Only a Scale planned from the API lists ReplicaSets twice, one
		// looking for a new hash once. Before, every Scale listed twice
		// (5–6 and 4 a phase).
		if n := p.counts["list replicasets"]; n > 2*p.api+p.hashes {
			t.Errorf("%s: %v ReplicaSet lists for %v Scales planned from the API and %v by hash; want 2 and 1 each, none for a Scale planned from the cache", p.what, n, p.api, p.hashes)
		}
		if p.api > p.wantAPI+1 {
			t.Errorf("%s: %v Scales planned from the API; want %v (one more when the cache lagged)", p.what, p.api, p.wantAPI)
		}
	}
	if hashPaused != 1 {
		t.Errorf("push → Paused: %v Scales planned from the cache and the new hash; want 1 (the new canary's first)", hashPaused)
	}
	// Applying a ReplicaSet sluice already owns (podsLabelled) or has just
	// created (createdBySluice) lists no pods to label (before, every
	// apply did: 4 and 3 pod lists; then the new canary's first apply).
	for what, counts := range map[string]map[string]float64{"push → Paused": toPaused, "promote → Healthy": toHealthy} {
		if n := counts["list pods"]; n > 0 {
			t.Errorf("%s: %v pod lists; want none (every set applied is sluice's already, or created by it)", what, n)
		}
	}
}

// The counts measured (docs/scale.md, "API requests per rollout": 6 and
// 5), with a margin of two for a request of the background (a retried
// conflict, an event).
const (
	maxToPaused  = 8
	maxToHealthy = 7
)

// scalePlans reads sluice_workload_scale_plans_total by source (cache, cache+hashes,
// api), summed over clusters.
func (d *daemon) scalePlans() map[string]float64 {
	return d.countersBy("sluice_workload_scale_plans_total", "source")
}

// kubeRequests reads sluice_kube_api_requests_total by "verb resource".
func (d *daemon) kubeRequests() map[string]float64 {
	return d.countersBy("sluice_kube_api_requests_total", "verb", "resource")
}

// countersBy scrapes /metrics and sums the counter family's samples by the
// values of labels, joined with spaces.
func (d *daemon) countersBy(family string, labels ...string) map[string]float64 {
	d.t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		d.t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, m := range families[family].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		key := make([]string, len(labels))
		for i, l := range labels {
			key[i] = have[l]
		}
		out[strings.Join(key, " ")] += m.GetCounter().GetValue()
	}
	return out
}

func diffCounts(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		if n := v - a[k]; n > 0 {
			out[k] = n
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

func table(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s %v\n", k, m[k])
	}
	return b.String()
}
