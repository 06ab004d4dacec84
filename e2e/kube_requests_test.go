package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

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

	before := d.kubeRequests()
	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kq.yaml": spec.yaml()})
	d.waitStatus(ns+"/kq", 60*time.Second, "paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	waitReplicaSet(t, c, ns, "kq", v2, 1, 60*time.Second)
	settle()
	paused := d.kubeRequests()

	d.cli("promote", ns+"/kq")
	d.waitStatus(ns+"/kq", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	waitReplicaSet(t, c, ns, "kq", v1, 0, 60*time.Second)
	settle()
	healthy := d.kubeRequests()

	toPaused, toHealthy := diffCounts(before, paused), diffCounts(paused, healthy)
	t.Logf("push → Paused (%v requests):\n%s", total(toPaused), table(toPaused))
	t.Logf("promote → Healthy, old stable at 0 (%v requests):\n%s", total(toHealthy), table(toHealthy))
	for _, p := range []struct {
		what   string
		counts map[string]float64
		most   float64
	}{{"push → Paused", toPaused, maxToPaused}, {"promote → Healthy", toHealthy, maxToHealthy}} {
		if n := total(p.counts); n > p.most {
			t.Errorf("%s: %v requests, more than the %v measured (docs/scale.md)", p.what, n, p.most)
		}
	}
	// Re-applying a ReplicaSet sluice already owns lists no pods to
	// label (podsLabelled): only the new canary's first apply may (before,
	// every apply did: 4 and 3 pod lists).
	if n := toPaused["list pods"]; n > 1 {
		t.Errorf("push → Paused: %v pod lists; want at most 1 (the new canary ReplicaSet)", n)
	}
	if n := toHealthy["list pods"]; n > 0 {
		t.Errorf("promote → Healthy: %v pod lists; want none (every set applied is sluice's already)", n)
	}
	// Only a Scale that cannot plan from the cache lists ReplicaSets (two
	// lists): the new canary's first, and the scale-down that retires the
	// old stable. Before, every Scale did (5–6 and 4).
	for _, p := range []struct {
		what   string
		counts map[string]float64
	}{{"push → Paused", toPaused}, {"promote → Healthy", toHealthy}} {
		if n := p.counts["list replicasets"]; n > 2 {
			t.Errorf("%s: %v ReplicaSet lists; want at most 2 (one Scale planned from the API)", p.what, n)
		}
	}
}

// The counts measured (docs/scale.md, "API requests per rollout": 8 and
// 5), with a margin of two for a request of the background (a retried
// conflict, an event).
const (
	maxToPaused  = 10
	maxToHealthy = 7
)

// kubeRequests reads sluice_kube_api_requests_total by "verb resource".
func (d *daemon) kubeRequests() map[string]float64 {
	d.t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sluice_kube_api_requests_total{") {
			continue
		}
		var resource, verb string
		var v float64
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "sluice_kube_api_requests_total{"), "} ")
		for _, kv := range strings.Split(labels, ",") {
			k, val, _ := strings.Cut(kv, "=")
			val = strings.Trim(val, `"`)
			switch k {
			case "resource":
				resource = val
			case "verb":
				verb = val
			}
		}
		if _, err := fmt.Sscanf(value, "%g", &v); err != nil {
			d.t.Fatalf("metric line %q: %v", line, err)
		}
		out[verb+" "+resource] = v
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
