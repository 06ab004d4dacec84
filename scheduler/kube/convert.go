package kube

import (
	"strings"

	rolloutsv1alpha1 "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler"
	"github.com/sluice-dev/sluice/scheduler/plan"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod labels sluice's ReplicaSets carry (issue 12): the rollout's name and
// Argo's pod-template hash.
const (
	LabelRollout = "sluice.io/rollout"
	LabelHash    = rolloutsv1alpha1.DefaultRolloutUniqueLabelKey
)

// nodeFromCore is the graph's view of a node: its labels and taints as
// they are, allocatable as capacity, and cordoning. Allocated stays zero:
// the binder tracks every bound pod in the graph itself.
func nodeFromCore(n *corev1.Node) scheduler.Node {
	out := scheduler.Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Unschedulable: n.Spec.Unschedulable,
		Capacity: scheduler.Resources{
			MilliCPU: n.Status.Allocatable.Cpu().MilliValue(),
			Memory:   n.Status.Allocatable.Memory().Value(),
			Pods:     n.Status.Allocatable.Pods().Value(),
		},
	}
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, scheduler.Taint{Key: t.Key, Value: t.Value, Effect: scheduler.TaintEffect(t.Effect)})
	}
	return out
}

// podKey is how the binder and the graph name a pod: namespace/name.
func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podFromCore is the scheduler's view of a pod: its group and service
// (groupOf), requests, node selector, required node affinity (terms the
// scheduler cannot evaluate are dropped: see affinityTerms), tolerations
// and dependencies (plan.DependsOnAnnotation).
func podFromCore(p *corev1.Pod) scheduler.Pod {
	out := scheduler.Pod{
		Name:             podKey(p),
		Requests:         podRequests(&p.Spec),
		NodeSelector:     p.Spec.NodeSelector,
		RequiredAffinity: affinityTerms(p.Spec.Affinity),
	}
	out.Group, out.Service = groupOf(p)
	if p.DeletionTimestamp != nil {
		// A terminating pod still holds its node's resources until it is
		// gone, but it is no longer part of its version's spread: like
		// kube-scheduler's PodTopologySpread (kubernetes#87621), the
		// replacement pods are spread as if it had left already.
		out.Group = ""
	}
	if canary := p.Annotations[api.BaselineOfAnnotation]; canary != "" && p.Labels[api.BaselineLabel] == "true" && out.Service != "" {
		// A baseline's pods mirror its canary's zones (BaselineMatch).
		out.Role, out.MatchGroup = scheduler.RoleBaseline, out.Service+"/"+canary
	}
	for _, t := range p.Spec.Tolerations {
		out.Tolerations = append(out.Tolerations, scheduler.Toleration{
			Key: t.Key, Operator: scheduler.TolerationOperator(t.Operator), Value: t.Value, Effect: scheduler.TaintEffect(t.Effect),
		})
	}
	for _, d := range strings.Split(p.Annotations[plan.DependsOnAnnotation], ",") {
		if d = strings.TrimSpace(d); d != "" {
			if !strings.Contains(d, "/") {
				d = p.Namespace + "/" + d
			}
			out.Dependencies = append(out.Dependencies, d)
		}
	}
	return out
}

// groupOf is the pod's spread group and service. A pod of a sluice
// ReplicaSet is in group namespace/rollout/hash (one version of one
// rollout is spread on its own, so a canary of 3 lands in 3 zones however
// the stable pods sit) and service namespace/rollout. Any other pod with a
// controller (a Deployment's ReplicaSet, a StatefulSet) is grouped by that
// controller, with no service; a bare pod is in no group.
func groupOf(p *corev1.Pod) (group, service string) {
	if r, h := p.Labels[LabelRollout], p.Labels[LabelHash]; r != "" && h != "" {
		svc := p.Namespace + "/" + r
		return svc + "/" + h, svc
	}
	if c := metav1.GetControllerOf(p); c != nil {
		return p.Namespace + "/" + strings.ToLower(c.Kind) + "/" + c.Name, ""
	}
	return "", ""
}

// podRequests is what the pod needs on a node, as kube-scheduler counts
// it: the sum of its containers and sidecars (restartable init
// containers), at least the largest ordinary init container plus the
// sidecars started before it, plus the pod overhead.
func podRequests(s *corev1.PodSpec) scheduler.Resources {
	var sum, sidecars, initMax scheduler.Resources
	for _, c := range s.Containers {
		sum = sum.Add(containerRequests(&c))
	}
	for _, c := range s.InitContainers {
		r := containerRequests(&c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = sidecars.Add(r)
			continue
		}
		initMax = maxResources(initMax, sidecars.Add(r))
	}
	out := maxResources(sum.Add(sidecars), initMax)
	if s.Overhead != nil {
		out.MilliCPU += s.Overhead.Cpu().MilliValue()
		out.Memory += s.Overhead.Memory().Value()
	}
	return out
}

func containerRequests(c *corev1.Container) scheduler.Resources {
	return scheduler.Resources{MilliCPU: c.Resources.Requests.Cpu().MilliValue(), Memory: c.Resources.Requests.Memory().Value()}
}

func maxResources(a, b scheduler.Resources) scheduler.Resources {
	return scheduler.Resources{MilliCPU: max(a.MilliCPU, b.MilliCPU), Memory: max(a.Memory, b.Memory), Pods: max(a.Pods, b.Pods)}
}

// affinityTerms converts required node affinity. The scheduler supports
// In, NotIn, Exists and DoesNotExist on labels; a term using Gt, Lt or
// matchFields could match nodes the scheduler cannot judge, so such a term
// is kept as "matches every node" (the pod is never wrongly held back;
// kube-scheduler would be stricter).
func affinityTerms(a *corev1.Affinity) []scheduler.SelectorTerm {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []scheduler.SelectorTerm
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var st scheduler.SelectorTerm
		supported := len(t.MatchFields) == 0
		for _, e := range t.MatchExpressions {
			op := scheduler.SelectorOperator(e.Operator)
			switch op {
			case scheduler.SelectorIn, scheduler.SelectorNotIn, scheduler.SelectorExists, scheduler.SelectorDoesNotExist:
				st.MatchExpressions = append(st.MatchExpressions, scheduler.SelectorRequirement{Key: e.Key, Operator: op, Values: e.Values})
			default:
				supported = false
			}
		}
		if !supported {
			return nil // one term matching everything makes the OR true
		}
		out = append(out, st)
	}
	return out
}
