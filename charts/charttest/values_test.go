package charttest

import (
	"reflect"
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
			presentArg: []string{"--leader-elect", "--state-store=kubernetes", "--xds-tls-cert-file=/etc/sluice/xds/tls.crt",
				"--xds-tls-key-file=/etc/sluice/xds/tls.key", "--xds-client-ca-file=/etc/sluice/xds/ca.crt"},
			absentArgs: []string{"--insecure-xds"}},
		{name: "xDS in plaintext, asked for", set: map[string]any{"xds": map[string]any{"insecure": true}},
			presentArg: []string{"--insecure-xds"}, absentArgs: []string{"--xds-tls-cert-file=/etc/sluice/xds/tls.crt"}},
		{name: "kube-scheduler places the pods", set: map[string]any{"schedulePods": false},
			absentRules: []string{"pods/binding", "pods/status", "events"}, presentArg: []string{"--schedule-pods=false"}},
		{name: "defaults read no cluster Secrets", absentRules: []string{"secrets"}, absentArgs: []string{"--cluster-secrets"}},
		{name: "cluster Secrets, asked for", set: map[string]any{"clusters": map[string]any{"secrets": true}},
			presentRules: []string{"secrets"}, presentArg: []string{"--cluster-secrets"}},
		{name: "bbolt, one replica, no election", set: map[string]any{"stateStore": "bbolt", "replicaCount": 1, "leaderElection": map[string]any{"enabled": false},
			"persistence": map[string]any{"existingClaim": "sluice-data"}},
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

// TestStateVolume: with stateStore bbolt the state directory is on a
// PersistentVolumeClaim, never an emptyDir (a restarted pod would have no
// record and take an in-flight canary's version as new), and the pod is
// recreated rather than rolled (one pod holds the file); the chart
// creates the claim only when asked. With the state in the cluster the
// directory holds only the git cache, on an emptyDir.
func TestStateVolume(t *testing.T) {
	bbolt := map[string]any{"stateStore": "bbolt", "replicaCount": 1, "leaderElection": map[string]any{"enabled": false}}
	for _, tc := range []struct {
		name         string
		set          map[string]any
		persistence  map[string]any
		wantClaim    string // "" means an emptyDir
		wantPVC      map[string]any
		wantRecreate bool
	}{
		{name: "kubernetes store", wantClaim: ""},
		{name: "kubernetes store ignores persistence", persistence: map[string]any{"create": true}, wantClaim: ""},
		{name: "bbolt on an existing claim", set: bbolt, persistence: map[string]any{"existingClaim": "sluice-data"},
			wantClaim: "sluice-data", wantRecreate: true},
		{name: "bbolt on a created claim", set: bbolt, persistence: map[string]any{"create": true, "storageClass": "fast-ssd", "size": "5Gi"},
			wantClaim: "sluice-state", wantRecreate: true, wantPVC: map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "fast-ssd",
				"resources": map[string]any{"requests": map[string]any{"storage": "5Gi"}}}},
		{name: "bbolt on a created claim of the default class", set: bbolt, persistence: map[string]any{"create": true},
			wantClaim: "sluice-state", wantRecreate: true, wantPVC: map[string]any{
				"accessModes": []any{"ReadWriteOnce"},
				"resources":   map[string]any{"requests": map[string]any{"storage": "1Gi"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := loadValues(t, "values-default.yaml")
			for k, v := range tc.set {
				vals[k] = v
			}
			if tc.persistence != nil {
				vals["persistence"] = tc.persistence
			}
			r, err := render(t, "sluice-system", vals)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeManifest(t, r.Manifest)
			var deploy *unstructured.Unstructured
			var pvcs []*unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "Deployment":
					deploy = o
				case "PersistentVolumeClaim":
					pvcs = append(pvcs, o)
				}
			}
			if deploy == nil {
				t.Fatal("no Deployment rendered")
			}
			vol := podVolume(t, deploy, "state")
			claim, _, _ := unstructured.NestedString(vol, "persistentVolumeClaim", "claimName")
			_, emptyDir := vol["emptyDir"]
			switch {
			case tc.wantClaim == "" && (!emptyDir || claim != ""):
				t.Errorf("state volume %v; want an emptyDir", vol)
			case tc.wantClaim != "" && (emptyDir || claim != tc.wantClaim):
				t.Errorf("state volume %v; want the claim %s, no emptyDir", vol, tc.wantClaim)
			}
			strategy, _, _ := unstructured.NestedString(deploy.Object, "spec", "strategy", "type")
			if got := strategy == "Recreate"; got != tc.wantRecreate {
				t.Errorf("Deployment strategy %q; want Recreate %v", strategy, tc.wantRecreate)
			}
			if tc.wantPVC == nil {
				if len(pvcs) != 0 {
					t.Errorf("rendered %d PersistentVolumeClaims, want none", len(pvcs))
				}
				return
			}
			if len(pvcs) != 1 || pvcs[0].GetName() != tc.wantClaim {
				t.Fatalf("rendered %d PersistentVolumeClaims; want one named %s", len(pvcs), tc.wantClaim)
			}
			spec, _, _ := unstructured.NestedMap(pvcs[0].Object, "spec")
			if !reflect.DeepEqual(spec, tc.wantPVC) {
				t.Errorf("claim spec %v, want %v", spec, tc.wantPVC)
			}
			if keep := pvcs[0].GetAnnotations()["helm.sh/resource-policy"]; keep != "keep" {
				t.Errorf("claim annotation helm.sh/resource-policy %q, want keep: uninstalling must not delete the state", keep)
			}
		})
	}
}

// podVolume is the Deployment's pod volume of that name.
func podVolume(t *testing.T, deploy *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	vols, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
	for _, v := range vols {
		if m := v.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no volume %s in the Deployment", name)
	return nil
}
