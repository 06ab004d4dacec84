package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api"
)

// The side-by-side run's pure parts (peer.go, peerside.go); the run itself
// needs two control planes and Argo's controller (docs/scale.md).

// TestPeerRolloutSameForBoth: the Rollout created on Argo's plane is valid
// for Argo's own types (strict: no field Argo does not know), and sluice's
// loader takes the same document in Kubernetes mode without an error: one
// replica, steps setWeight 20 then an open pause, no traffic routing.
func TestPeerRolloutSameForBoth(t *testing.T) {
	f := fleet{n: 12, namespaces: 5}
	const i = 7
	obj, err := f.peerRollout(i, versionOld)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	var ro v1alpha1.Rollout
	if err := yaml.UnmarshalStrict(raw, &ro); err != nil {
		t.Fatalf("not an Argo Rollout: %v", err)
	}
	if ro.Namespace != f.namespace(i) || ro.Name != f.name(i) {
		t.Errorf("object %s/%s, want %s", ro.Namespace, ro.Name, f.key(i))
	}
	if ro.Spec.Replicas == nil || *ro.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", ro.Spec.Replicas)
	}
	if got := ro.Spec.Template.Spec.Containers[0].Image; got != versionOld {
		t.Errorf("image %q, want %q", got, versionOld)
	}
	c := ro.Spec.Strategy.Canary
	if c == nil || len(c.Steps) != 2 || c.Steps[0].SetWeight == nil || *c.Steps[0].SetWeight != peerCanaryWeight ||
		c.Steps[1].Pause == nil || c.Steps[1].Pause.Duration != nil {
		t.Errorf("canary steps %+v, want setWeight %d then pause {}", c, peerCanaryWeight)
	}
	if c != nil && c.TrafficRouting != nil {
		t.Errorf("trafficRouting %+v: neither controller should have a router to drive", c.TrafficRouting)
	}
	if sel := ro.Spec.Selector.MatchLabels["app"]; sel != ro.Spec.Template.Labels["app"] {
		t.Errorf("selector app=%q does not select the template's app=%q", sel, ro.Spec.Template.Labels["app"])
	}

	set := api.NewLoader(api.Limits{}).ForKubernetes().Load([]api.Source{{Name: f.file(i), Data: []byte(f.peerRolloutYAML(i, versionOld))}})
	if errs := set.Diagnostics.Errors(); len(errs) > 0 || len(set.Rollouts) != 1 {
		t.Fatalf("sluice loads %d rollouts with errors %v; want the one, no error", len(set.Rollouts), errs)
	}
}

// TestArgoImagePatchChangesOnlyTheImage: the change made on Argo's plane
// is the change pushed to git: the v2 document is the v1 object with the
// patch applied.
func TestArgoImagePatchChangesOnlyTheImage(t *testing.T) {
	f := fleet{n: 3, namespaces: 2}
	v1, err := f.peerRollout(1, versionOld)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := f.peerRollout(1, versionNew)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(v1.Object)
	p, err := jsonpatch.DecodePatch(argoImagePatch(versionNew))
	if err != nil {
		t.Fatal(err)
	}
	patched, err := p.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(v2.Object)
	if !jsonpatch.Equal(patched, want) {
		t.Errorf("patched v1:\n%s\nwant v2:\n%s", patched, want)
	}
}

// TestPeerStatusReadings: what counts as Healthy and as Paused at the
// canary step on each side, from the status each controller writes.
func TestPeerStatusReadings(t *testing.T) {
	obj := func(generation int64, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
		u.SetGeneration(generation)
		return u
	}
	argoPaused := map[string]any{"phase": "Paused", "currentStepIndex": int64(1), "observedGeneration": "2",
		"currentPodHash": "new", "stableRS": "old"}
	with := func(m map[string]any, k string, v any) map[string]any {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		c[k] = v
		return c
	}
	for _, tc := range []struct {
		name string
		ok   func(*unstructured.Unstructured) bool
		obj  *unstructured.Unstructured
		want bool
	}{
		{"argo paused at the canary", argoPausedAtCanary, obj(2, argoPaused), true},
		{"argo status of the previous spec", argoPausedAtCanary, obj(3, argoPaused), false},
		{"argo paused before the weight", argoPausedAtCanary, obj(2, with(argoPaused, "currentStepIndex", int64(0))), false},
		{"argo paused with no canary apart from stable", argoPausedAtCanary, obj(2, with(argoPaused, "currentPodHash", "old")), false},
		{"argo healthy", argoHealthy, obj(1, map[string]any{"phase": "Healthy", "observedGeneration": "1"}), true},
		{"argo healthy, stale", argoHealthy, obj(2, map[string]any{"phase": "Healthy", "observedGeneration": "1"}), false},
		{"argo progressing", argoHealthy, obj(1, map[string]any{"phase": "Progressing", "observedGeneration": "1"}), false},
		{"sluice healthy at v1", sluiceHealthyAt(versionOld), obj(1, map[string]any{"phase": "Healthy", "stableVersion": versionOld}), true},
		{"sluice healthy at another version", sluiceHealthyAt(versionOld), obj(1, map[string]any{"phase": "Healthy", "stableVersion": versionNew}), false},
		{"sluice paused at 20 % with v2", sluicePausedAt(versionNew), obj(1, map[string]any{"phase": "Paused", "stepIndex": int64(1),
			"canaryVersion": versionNew, "canaryWeight": int64(20)}), true},
		{"sluice paused, canary at 0 %", sluicePausedAt(versionNew), obj(1, map[string]any{"phase": "Paused", "stepIndex": int64(1),
			"canaryVersion": versionNew, "canaryWeight": int64(0)}), false},
		{"sluice progressing", sluicePausedAt(versionNew), obj(1, map[string]any{"phase": "Progressing", "stepIndex": int64(0),
			"canaryVersion": versionNew}), false},
	} {
		if got := tc.ok(tc.obj); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPrintPeerTable: the table puts the two controllers side by side with
// sluice's figure divided by Argo's (CPU by Argo's plus kube-scheduler's).
func TestPrintPeerTable(t *testing.T) {
	r := PeerResult{Rollouts: 1000, Namespaces: 10, Nodes: 200, KCMArgs: "--kube-api-qps=100", SettleSeconds: 30,
		Sluice: PeerSide{Controller: "sluice", HealthySeconds: 60, PausedSeconds: 40, CanaryPodsRunning: 1000,
			Process:               ProcessUsage{SteadyRSSBytes: 300 << 20, SteadyAnonBytes: 100 << 20, SteadyFileBytes: 200 << 20, ChangePeakAnonBytes: 150 << 20, ChangeCPUSeconds: 30},
			PlaneChangeCPUSeconds: map[string]float64{"etcd": 2, "apiserver": 10, "controller-manager": 3, "kwok": 1},
			PlaneChangeRequests:   map[string]float64{"PUT sluicerollouts/status": 5000, "PATCH replicasets": 3000, "LIST replicasets": 2000, "POST pods/binding": 1000, "POST events": 1000}},
		Argo: PeerSide{Controller: "argo-rollouts v1.10.1", HealthySeconds: 120, PausedSeconds: 100, CanaryPodsRunning: 999,
			Process: ProcessUsage{SteadyRSSBytes: 200 << 20, SteadyAnonBytes: 125 << 20, SteadyFileBytes: 75 << 20, ChangePeakAnonBytes: 200 << 20, ChangeCPUSeconds: 40}, Scheduler: &ProcessUsage{ChangeCPUSeconds: 20},
			PlaneChangeCPUSeconds: map[string]float64{"etcd": 4, "apiserver": 20, "controller-manager": 6, "kwok": 2},
			PlaneChangeRequests:   map[string]float64{"PUT rollouts": 5000, "POST replicasets": 1000}},
	}
	var b bytes.Buffer
	if err := printPeerTable(&b, r); err != nil {
		t.Fatal(err)
	}
	row := func(prefix string) string {
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, b.String())
		return ""
	}
	for prefix, want := range map[string][]string{
		"start → every rollout Healthy":       {"60.0 s", "120.0 s", "0.50"},
		"change → every rollout Paused at 20": {"40.0 s", "100.0 s", "0.40"},
		"  canary pods Running then":          {"1000", "999"},
		"RSS steady (30 s after Healthy)":     {"300 MiB", "200 MiB", "1.50"},
		"  of the steady RSS: own memory":     {"100 MiB / 200 MiB", "125 MiB / 75 MiB", "0.80"},
		"  own memory's peak, change":         {"150 MiB", "200 MiB", "0.75"},
		"CPU, change → Paused":                {"30.0 s", "40.0 s (+ 20.0 s kube-scheduler)", "0.50"},
		"apiserver requests, change → Paused": {"12000, 12.0 a rollout (PUT sluicerollouts/status 5000, PATCH replicasets 3000, LIST replicasets 2000, POST events 1000)", "6000, 6.0 a rollout (PUT rollouts 5000, POST replicasets 1000)", "2.00"},
		"control plane CPU, change → Paused":  {"16.0 s (etcd 2.0, apiserver 10.0, controller-manager 3.0, kwok 1.0)", "32.0 s", "0.50"},
	} {
		line := row(prefix)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("row %q lacks %q", line, w)
			}
		}
	}
	if !strings.Contains(row("figure"), "argo-rollouts v1.10.1 + kube-scheduler") {
		t.Errorf("header does not name Argo's controller: %q", row("figure"))
	}
}
