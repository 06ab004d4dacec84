package plan

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const nodesYAML = `
topologyKeys: [topology.kubernetes.io/zone]
nodes:
- name: a
  labels: {topology.kubernetes.io/zone: z1, node.kubernetes.io/instance-type: m5}
  capacity: {cpu: "2", memory: 4Gi, pods: 10}
  allocated: {cpu: 500m, memory: 1Gi, pods: 1}
  heat: 0.5
- name: b
  labels: {topology.kubernetes.io/zone: z2, node.kubernetes.io/instance-type: m5}
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
  capacity: {cpu: "2", memory: 4Gi, pods: 10}
- name: c
  labels: {topology.kubernetes.io/zone: z2, node.kubernetes.io/instance-type: c5}
  capacity: {cpu: "2", memory: 4Gi, pods: 10}
pods:
- {name: db-0, service: default/db, node: c, cpu: 100m, memory: 128Mi}
`

func TestParseCluster(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		nodes   int
		wantErr string
	}{
		{"document", nodesYAML, 3, ""},
		{"bare list", "- {name: a, capacity: {cpu: '1', memory: 1Gi, pods: 5}}\n- {name: b, capacity: {cpu: '1', memory: 1Gi, pods: 5}}\n", 2, ""},
		{"unknown field", "nodes:\n- {name: a, cpu: 1}\n", 0, "unknown field"},
		{"duplicate", "- {name: a, capacity: {cpu: '1', memory: 1Gi, pods: 5}}\n- {name: a, capacity: {cpu: '1', memory: 1Gi, pods: 5}}\n", 0, `duplicate node "a"`},
		{"no capacity", "- {name: a}\n", 0, "capacity needs cpu, memory and pods"},
		{"bad quantity", "- {name: a, capacity: {cpu: lots, memory: 1Gi, pods: 5}}\n", 0, "decode nodes"},
		{"pod on unknown node", "nodes:\n- {name: a, capacity: {cpu: '1', memory: 1Gi, pods: 5}}\npods:\n- {name: p, service: s, node: x}\n", 0, "known node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCluster([]byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Nodes) != tc.nodes {
				t.Fatalf("%d nodes, want %d", len(c.Nodes), tc.nodes)
			}
		})
	}
	c, _ := ParseCluster([]byte(nodesYAML))
	if got := c.Nodes[0].node(); got.Capacity.MilliCPU != 2000 || got.Allocated.MilliCPU != 500 || got.Allocated.Memory != 1<<30 || got.Heat != 0.5 {
		t.Errorf("node a = %+v", got)
	}
}

func rollout(mod func(*corev1.PodSpec, *metav1.ObjectMeta)) *api.Rollout {
	r := &api.Rollout{Key: api.Key{Namespace: "shop", Name: "web"}, Replicas: 2}
	r.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}},
		{Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}},
	}
	if mod != nil {
		mod(&r.Spec.Template.Spec, &r.Spec.Template.ObjectMeta)
	}
	return r
}

func TestPodsFor(t *testing.T) {
	tests := []struct {
		name     string
		r        *api.Rollout
		baseline bool
		check    func(t *testing.T, pods []scheduler.Pod)
		wantErr  string
	}{
		{"requests summed, groups named", rollout(nil), true, func(t *testing.T, pods []scheduler.Pod) {
			names := []string{"shop/web-canary-0", "shop/web-canary-1", "shop/web-baseline-0", "shop/web-baseline-1"}
			for i, p := range pods {
				if p.Name != names[i] || p.Requests.MilliCPU != 300 || p.Requests.Memory != 64<<20 || p.Service != "shop/web" {
					t.Errorf("pod %d = %+v", i, p)
				}
			}
			if pods[2].Role != scheduler.RoleBaseline || pods[2].MatchGroup != "shop/web/canary" || pods[2].Group != "shop/web/baseline" {
				t.Errorf("baseline = %+v", pods[2])
			}
		}, ""},
		{"template scheduling fields", rollout(func(s *corev1.PodSpec, m *metav1.ObjectMeta) {
			s.NodeSelector = map[string]string{"disk": "ssd"}
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
			}}}
			m.Annotations = map[string]string{DependsOnAnnotation: "db, other/cache"}
		}), false, func(t *testing.T, pods []scheduler.Pod) {
			p := pods[0]
			if len(pods) != 2 || p.NodeSelector["disk"] != "ssd" || p.Tolerations[0].Operator != scheduler.TolerationExists ||
				p.RequiredAffinity[0].MatchExpressions[0].Operator != scheduler.SelectorIn ||
				!slices.Equal(p.Dependencies, []string{"shop/db", "other/cache", "shop/extra"}) {
				t.Errorf("pod = %+v", p)
			}
		}, ""},
		{"unsupported operator", rollout(func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}}}},
			}}}
		}), false, nil, "operator Gt is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := PodsFor(tc.r, 2, tc.baseline, []string{"extra"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pods)
		})
	}
}

func TestRun(t *testing.T) {
	c, err := ParseCluster([]byte(nodesYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  Options
		check func(t *testing.T, r *Report)
		err   error
	}{
		{"canary and baseline", Options{Baseline: true}, func(t *testing.T, r *Report) {
			// b is tainted: a (z1) and c (z2) take one canary each.
			if len(r.Placements) != 4 || len(r.Unschedulable) != 0 {
				t.Fatalf("report = %+v", r)
			}
			for _, g := range r.Domains {
				if g.Skew != 0 {
					t.Errorf("group %s skew %d", g.Group, g.Skew)
				}
			}
		}, nil},
		{"critical zone avoided", Options{Critical: []string{"default/db"}, Replicas: 2}, func(t *testing.T, r *Report) {
			// z1 is the only eligible zone, so skew cannot grow there.
			if len(r.Placements) != 2 || r.Placements[0].Node != "a" || r.Placements[1].Node != "a" || len(r.Unschedulable) != 0 {
				t.Fatalf("report = %+v", r)
			}
			if !slices.Equal(r.Domains[0].Avoided, []string{"z2"}) || r.Domains[0].Skew != 0 {
				t.Errorf("domains = %+v", r.Domains[0])
			}
		}, nil},
		{"unschedulable with reasons", Options{Replicas: 12}, func(t *testing.T, r *Report) {
			// 300m each: a has 1500m free (5 pods), c 1900m (6 pods, db
			// uses 100m), b is tainted.
			if len(r.Placements) != 11 || len(r.Unschedulable) != 1 {
				t.Fatalf("%d placed, %d unschedulable", len(r.Placements), len(r.Unschedulable))
			}
			if u := r.Unschedulable[0]; u.Diagnosis == nil || !strings.Contains(u.Reason, "0/3 nodes are available") {
				t.Errorf("unschedulable = %+v", u)
			}
		}, nil},
		{"explain", Options{Explain: "shop/web-canary-1", TopN: 1}, func(t *testing.T, r *Report) {
			if r.Explain == nil || r.Explain.Pod != "shop/web-canary-1" || len(r.Explain.Top) != 1 {
				t.Fatalf("explain = %+v", r.Explain)
			}
		}, nil},
		{"explain unknown pod", Options{Explain: "nope"}, nil, ErrExplainNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Cluster, tc.opts.Rollout, tc.opts.Seed = c, rollout(nil), 1
			r, err := Run(context.Background(), tc.opts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

// TestRunReplicasCapped: finding N11. A plan for more pods than
// api.MaxReplicas (a persisted rollout or `sluice schedule --replicas`
// bypass the file validation) is refused before anything is allocated;
// `sluice schedule` reached 2 GB in 20 s with 2147483647. At the maximum
// the plan completes with bounded memory.
func TestRunReplicasCapped(t *testing.T) {
	cluster, err := ParseCluster([]byte(nodesYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		replicas int32
		wantErr  bool
		maxBytes uint64 // total allocated during Run
	}{
		{"int32 max", 2147483647, true, 1 << 20},
		{"one over the maximum", api.MaxReplicas + 1, true, 1 << 20},
		{"the maximum", api.MaxReplicas, false, 128 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ro := rollout(nil)
			ro.Replicas = tc.replicas
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rep, err := Run(context.Background(), Options{Cluster: cluster, Rollout: ro, Seed: 1})
			runtime.ReadMemStats(&after)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "more than the maximum of 10000") {
				t.Errorf("err = %v, want it to name the maximum", err)
			}
			if err == nil && len(rep.Placements)+len(rep.Unschedulable) != api.MaxReplicas {
				t.Errorf("%d placed + %d unschedulable, want %d pods", len(rep.Placements), len(rep.Unschedulable), api.MaxReplicas)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > tc.maxBytes {
				t.Errorf("allocated %d MB, want at most %d MB", alloc>>20, tc.maxBytes>>20)
			} else {
				t.Logf("allocated %.1f MB", float64(alloc)/(1<<20))
			}
		})
	}
}
