package api

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refRollout is kubeRollout with its template replaced by a workloadRef;
// the %s is the workloadRef's body.
const refRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: checkout, namespace: shop}
spec:
  replicas: 4
  workloadRef:
%s
  strategy:
    canary:
      trafficRouting:
        plugins:
          sluice.io/xds: {host: checkout.shop}
      steps: [{setWeight: 20}]
`

func refDoc(body string) string { return strings.Replace(refRollout, "%s", body, 1) }

const deploymentRef = "    {apiVersion: apps/v1, kind: Deployment, name: checkout}"

// TestWorkloadRefAccepted: in Kubernetes mode a workloadRef to an apps/v1
// Deployment loads, with Argo's default scaleDown (never), no selector of
// its own, and no pod-template hash until its Deployment is resolved.
func TestWorkloadRefAccepted(t *testing.T) {
	set := loadKube(t, refDoc(deploymentRef))
	if set.Diagnostics.HasErrors() {
		t.Fatalf("errors: %s", diagnosticText(set.Diagnostics))
	}
	w := set.Rollouts[0].Workload
	if w.Ref == nil || w.Ref.Name != "checkout" || w.Ref.ScaleDown != ScaleDownNever {
		t.Fatalf("ref = %+v, want checkout with scaleDown never", w.Ref)
	}
	if w.PodTemplateHash != "" {
		t.Errorf("hash %q before the Deployment is resolved", w.PodTemplateHash)
	}
	for _, sd := range []ScaleDown{ScaleDownNever, ScaleDownOnSuccess, ScaleDownProgressively} {
		set := loadKube(t, refDoc("    {apiVersion: apps/v1, kind: Deployment, name: checkout, scaleDown: "+string(sd)+"}"))
		if set.Diagnostics.HasErrors() || set.Rollouts[0].Workload.Ref.ScaleDown != sd {
			t.Errorf("scaleDown %s: %s", sd, diagnosticText(set.Diagnostics))
		}
	}
}

// TestWorkloadRefStandalone: standalone mode keeps its meaning of a
// workloadRef rollout: the version names the reference.
func TestWorkloadRefStandalone(t *testing.T) {
	doc := strings.Replace(refDoc(deploymentRef), "{host: checkout.shop}",
		"{host: checkout.shop, endpoints: {\"workloadRef:Deployment/checkout\": [\"10.0.0.1:80\"]}}", 1)
	set := Load([]Source{{Name: "r.yaml", Data: []byte(doc)}})
	if len(set.Rollouts) != 1 {
		t.Fatalf("not loaded: %s", diagnosticText(set.Diagnostics))
	}
	if v := set.Rollouts[0].Version; v != "workloadRef:Deployment/checkout" {
		t.Errorf("version %q", v)
	}
}

// TestWorkloadRefRefused: only an apps/v1 Deployment with a name and a
// known scaleDown; each error names file, line and field.
func TestWorkloadRefRefused(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"    {apiVersion: apps/v1, kind: ReplicaSet, name: checkout}", `r.yaml:7: spec.workloadRef.kind: sluice cannot run this: must be Deployment, got "ReplicaSet"`},
		{"    {apiVersion: extensions/v1beta1, kind: Deployment, name: checkout}", `r.yaml:7: spec.workloadRef.apiVersion: sluice cannot run this: must be apps/v1 (a Deployment), got "extensions/v1beta1"`},
		{"    {kind: Deployment, name: checkout}", `r.yaml:6: spec.workloadRef.apiVersion: sluice cannot run this: must be apps/v1 (a Deployment), got ""`},
		{"    {apiVersion: apps/v1, kind: Deployment}", `r.yaml:6: spec.workloadRef.name: required`},
		{"    apiVersion: apps/v1\n    kind: Deployment\n    name: checkout\n    scaleDown: sometimes", `r.yaml:10: spec.workloadRef.scaleDown: unknown value "sometimes": one of never, onsuccess, progressively`},
	} {
		set := loadKube(t, refDoc(tc.body))
		got := string(diagnosticText(set.Diagnostics.Errors()))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.want)
		}
		if len(set.Rollouts) != 0 {
			t.Errorf("%s: loaded despite the error", tc.body)
		}
	}
}

func deploymentTemplate(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "checkout"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// TestResolveWorkloadRefs: a resolved rollout runs its Deployment's
// template with the version and hashes a template in git would give it;
// a missing Deployment rejects the rollout with the reason at
// spec.workloadRef, and the loaded set itself is left as it was.
func TestResolveWorkloadRefs(t *testing.T) {
	set := loadKube(t, refDoc(deploymentRef))
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}}
	found := func(ns, name string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error) {
		if ns != "shop" || name != "checkout" {
			t.Fatalf("looked up %s/%s", ns, name)
		}
		return deploymentTemplate("shop/checkout:v2"), selector, nil
	}
	resolved := set.ResolveWorkloadRefs(found)
	if resolved.Diagnostics.HasErrors() || len(resolved.Rollouts) != 1 {
		t.Fatalf("not resolved: %s", diagnosticText(resolved.Diagnostics))
	}
	r := resolved.Rollouts[0]
	// The same template written in git: same version, same hashes.
	inGit := loadKube(t, kubeRollout).Rollouts[0]
	if r.Version != "shop/checkout:v2" || r.Workload.PodTemplateHash != inGit.Workload.PodTemplateHash ||
		r.Workload.BaselineHash != inGit.Workload.BaselineHash {
		t.Errorf("resolved version %q hash %q baseline %q; a template in git gives %q %q %q", r.Version,
			r.Workload.PodTemplateHash, r.Workload.BaselineHash, inGit.Version, inGit.Workload.PodTemplateHash, inGit.Workload.BaselineHash)
	}
	if r.Spec.Selector == nil || r.Spec.Selector.MatchLabels["app"] != "checkout" || !r.Spec.TemplateResolvedFromRef {
		t.Errorf("selector %v, resolved %v: want the Deployment's", r.Spec.Selector, r.Spec.TemplateResolvedFromRef)
	}
	if set.Rollouts[0].Workload.PodTemplateHash != "" || !set.Rollouts[0].Spec.EmptyTemplate() {
		t.Error("resolving changed the loaded set")
	}
	newImage := set.ResolveWorkloadRefs(func(string, string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error) {
		return deploymentTemplate("shop/checkout:v3"), selector, nil
	}).Rollouts[0]
	if newImage.Version != "shop/checkout:v3" || newImage.Workload.PodTemplateHash == r.Workload.PodTemplateHash {
		t.Errorf("a new image in the Deployment: version %q hash %q", newImage.Version, newImage.Workload.PodTemplateHash)
	}

	missing := set.ResolveWorkloadRefs(func(ns, name string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error) {
		return nil, nil, errors.New("Deployment shop/checkout not found")
	})
	if len(missing.Rollouts) != 0 || len(missing.Rejected) != 1 || missing.Rejected[0].Key != r.Key {
		t.Fatalf("missing Deployment: rollouts %d rejected %+v", len(missing.Rollouts), missing.Rejected)
	}
	got := missing.Rejected[0].Diagnostics[0].String()
	if want := "r.yaml:6: spec.workloadRef: Deployment shop/checkout not found: the rollout holds"; !strings.HasPrefix(got, want) {
		t.Errorf("diagnostic %q, want prefix %q", got, want)
	}
	noImage := set.ResolveWorkloadRefs(func(string, string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error) {
		return &corev1.PodTemplateSpec{}, selector, nil
	})
	if len(noImage.Rejected) != 1 || !strings.Contains(noImage.Rejected[0].Diagnostics[0].Message, "no first container image") {
		t.Errorf("a template without containers: %+v", noImage.Rejected)
	}
}
