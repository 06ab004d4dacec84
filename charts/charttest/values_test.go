package charttest

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestValuesShapeRBACAndArgs: switches that drop a feature drop its rules
// and its flags (least privilege follows the values), and add nothing.
func TestValuesShapeRBACAndArgs(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		set                      map[string]any
		absentRules, absentArgs  []string
		presentRules, presentArg []string
	}{
		{name: "defaults",
			presentRules: []string{"pods/binding", "pods/status", "events", "sluicerollouts", "sluicerollouts/status", "leases", "configmaps"},
			presentArg:   []string{"--leader-elect", "--state-store=kubernetes"}},
		{name: "kube-scheduler places the pods", set: map[string]any{"schedulePods": false},
			absentRules: []string{"pods/binding", "pods/status", "events"}, presentArg: []string{"--schedule-pods=false"}},
		{name: "bbolt, one replica, no election", set: map[string]any{"stateStore": "bbolt", "replicaCount": 1, "leaderElection": map[string]any{"enabled": false}},
			absentRules: []string{"sluicerollouts", "sluicerollouts/status", "configmaps", "leases"}, absentArgs: []string{"--leader-elect"},
			presentArg: []string{"--state-store=bbolt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := loadValues(t, "values-default.yaml")
			for k, v := range tc.set {
				vals[k] = v
			}
			r, err := render(t, "sluice-system", vals)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeManifest(t, r.Manifest)
			resources, args := grantedResources(t, objs), deploymentArgs(t, objs)
			for _, res := range tc.absentRules {
				if slices.Contains(resources, res) {
					t.Errorf("rules grant %s; want none", res)
				}
			}
			for _, res := range tc.presentRules {
				if !slices.Contains(resources, res) {
					t.Errorf("rules grant no %s", res)
				}
			}
			for _, a := range tc.absentArgs {
				if slices.Contains(args, a) {
					t.Errorf("args %v hold %s", args, a)
				}
			}
			for _, a := range tc.presentArg {
				if !slices.Contains(args, a) {
					t.Errorf("args %v lack %s", args, a)
				}
			}
		})
	}
}

// grantedResources is every resource some Role or ClusterRole names.
func grantedResources(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			out = append(out, res...)
		}
	}
	return out
}

// deploymentArgs is the sluice container's arguments.
func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if len(args) == 0 || !strings.HasPrefix(args[0], "run") {
			t.Fatalf("container args %v do not start with run", args)
		}
		return args
	}
	t.Fatal("no Deployment rendered")
	return nil
}
