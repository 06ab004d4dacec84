package istio

import (
	"fmt"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PodTemplateHashLabel keys the two subsets on the pods of each side, as
// Argo Rollouts keys them; sluice's ReplicaSets carry it.
const PodTemplateHashLabel = "rollouts-pod-template-hash"

// drPatch is the outcome of patching one DestinationRule.
type drPatch struct {
	found, written []string
}

// patchDestinationRule sets the hash label of the stable and canary
// subsets in obj (a canary hash of "" means no canary: the canary subset
// selects the stable pods). The subsets' other labels, the other subsets
// and every other field are left as they were.
func patchDestinationRule(obj *unstructured.Unstructured, ref *api.IstioDestinationRule, stableHash, canaryHash string) (drPatch, error) {
	where := objectName(obj)
	if canaryHash == "" {
		canaryHash = stableHash
	}
	subsets, _, err := unstructured.NestedSlice(obj.Object, "spec", "subsets")
	if err != nil {
		return drPatch{}, fmt.Errorf("%s: spec.subsets: %w", where, err)
	}
	stable, canary := subsetIndex(subsets, ref.StableSubsetName), subsetIndex(subsets, ref.CanarySubsetName)
	for name, i := range map[string]int{ref.StableSubsetName: stable, ref.CanarySubsetName: canary} {
		if i < 0 {
			return drPatch{}, fmt.Errorf("%s: subset %q not found", where, name)
		}
	}
	p := drPatch{found: projectDR(subsets, stable, canary)}
	for _, s := range []struct {
		i    int
		hash string
	}{{stable, stableHash}, {canary, canaryHash}} {
		if s.hash == "" {
			continue // nothing known to select: leave the subset as it is
		}
		if err := unstructured.SetNestedField(subsets[s.i].(map[string]any), s.hash, "labels", PodTemplateHashLabel); err != nil {
			return drPatch{}, fmt.Errorf("%s: subset %q: %w", where, routeName(subsets[s.i]), err)
		}
	}
	if err := unstructured.SetNestedSlice(obj.Object, subsets, "spec", "subsets"); err != nil {
		return drPatch{}, fmt.Errorf("%s: %w", where, err)
	}
	p.written = projectDR(subsets, stable, canary)
	return p, nil
}

// stableHashOf is the stable subset's hash label as found ("" if unset):
// Release points the canary subset at it.
func stableHashOf(obj *unstructured.Unstructured, ref *api.IstioDestinationRule) string {
	subsets, _, _ := unstructured.NestedSlice(obj.Object, "spec", "subsets")
	i := subsetIndex(subsets, ref.StableSubsetName)
	if i < 0 {
		return ""
	}
	h, _, _ := unstructured.NestedString(subsets[i].(map[string]any), "labels", PodTemplateHashLabel)
	return h
}

func subsetIndex(subsets []any, name string) int {
	for i, s := range subsets {
		if _, ok := s.(map[string]any); ok && routeName(s) == name {
			return i
		}
	}
	return -1
}

// projectDR lists the managed fields: each side's subset hash label.
func projectDR(subsets []any, stable, canary int) []string {
	var lines []string
	for _, i := range []int{stable, canary} {
		h, _, _ := unstructured.NestedString(subsets[i].(map[string]any), "labels", PodTemplateHashLabel)
		lines = append(lines, fmt.Sprintf("subset %q: %s=%s", routeName(subsets[i]), PodTemplateHashLabel, h))
	}
	return lines
}
