package plan

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
)

// DependsOnAnnotation on the rollout's pod template lists, comma-separated,
// the services (namespace/name) its pods talk to.
const DependsOnAnnotation = "sluice.io/depends-on"

// Group names of a rollout's pods.
func canaryGroup(r *api.Rollout) string   { return r.Key.String() + "/canary" }
func baselineGroup(r *api.Rollout) string { return r.Key.String() + "/baseline" }

// PodsFor returns n canary pods of rollout r and, with baseline, n baseline
// pods after them (baseline pods are placed after the canary they mirror).
// Requests, node selector, required node affinity and tolerations come from
// the rollout's pod template; dependencies from DependsOnAnnotation plus
// extraDeps.
func PodsFor(r *api.Rollout, n int32, baseline bool, extraDeps []string) ([]scheduler.Pod, error) {
	tmpl := r.Spec.Template
	base := scheduler.Pod{
		Service:      r.Key.String(),
		NodeSelector: tmpl.Spec.NodeSelector,
	}
	for _, c := range tmpl.Spec.Containers {
		base.Requests.MilliCPU += c.Resources.Requests.Cpu().MilliValue()
		base.Requests.Memory += c.Resources.Requests.Memory().Value()
	}
	for _, t := range tmpl.Spec.Tolerations {
		base.Tolerations = append(base.Tolerations, scheduler.Toleration{
			Key: t.Key, Operator: scheduler.TolerationOperator(t.Operator), Value: t.Value, Effect: scheduler.TaintEffect(t.Effect),
		})
	}
	terms, err := requiredTerms(tmpl.Spec.Affinity)
	if err != nil {
		return nil, fmt.Errorf("rollout %s: %w", r.Key, err)
	}
	base.RequiredAffinity = terms
	for _, d := range strings.Split(tmpl.Annotations[DependsOnAnnotation], ",") {
		if d = strings.TrimSpace(d); d != "" {
			base.Dependencies = append(base.Dependencies, qualify(d, r.Namespace))
		}
	}
	for _, d := range extraDeps {
		base.Dependencies = append(base.Dependencies, qualify(d, r.Namespace))
	}
	var pods []scheduler.Pod
	for i := range n {
		p := base
		p.Name = fmt.Sprintf("%s-canary-%d", r.Key, i)
		p.Group, p.Role = canaryGroup(r), scheduler.RoleCanary
		pods = append(pods, p)
	}
	if baseline {
		for i := range n {
			p := base
			p.Name = fmt.Sprintf("%s-baseline-%d", r.Key, i)
			p.Group, p.Role, p.MatchGroup = baselineGroup(r), scheduler.RoleBaseline, canaryGroup(r)
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// qualify puts a bare service name in namespace ns.
func qualify(svc, ns string) string {
	if strings.Contains(svc, "/") {
		return svc
	}
	return ns + "/" + svc
}

func requiredTerms(a *corev1.Affinity) ([]scheduler.SelectorTerm, error) {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, nil
	}
	var out []scheduler.SelectorTerm
	for i, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchFields) > 0 {
			return nil, fmt.Errorf("node affinity term %d: matchFields is not supported", i)
		}
		var st scheduler.SelectorTerm
		for _, e := range t.MatchExpressions {
			op := scheduler.SelectorOperator(e.Operator)
			switch op {
			case scheduler.SelectorIn, scheduler.SelectorNotIn, scheduler.SelectorExists, scheduler.SelectorDoesNotExist:
			default:
				return nil, fmt.Errorf("node affinity term %d: operator %s is not supported", i, e.Operator)
			}
			st.MatchExpressions = append(st.MatchExpressions, scheduler.SelectorRequirement{Key: e.Key, Operator: op, Values: e.Values})
		}
		out = append(out, st)
	}
	return out, nil
}
