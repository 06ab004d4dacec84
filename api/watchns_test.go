package api

import (
	"strings"
	"testing"
)

// TestWatchNamespacesRejectsOthers: a rollout outside the watched
// namespaces is rejected at its metadata, naming the file, the line and
// the namespace; the others load as before, and no restriction keeps all.
func TestWatchNamespacesRejectsOthers(t *testing.T) {
	src := func(name, ns string) Source {
		return Source{Name: name + ".yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  replicas: 2
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: app, image: shop/app:v1}]}
  strategy:
    canary:
      steps: [{setWeight: 50}]
      trafficRouting:
        plugins:
          sluice.io/xds: {host: ` + name + `.shop}
`)}
	}
	sources := []Source{src("in", "team-a"), src("out", "team-b")}

	all := NewLoader(Limits{}).ForKubernetes().Load(sources)
	if len(all.Rollouts) != 2 || len(all.Rejected) != 0 {
		t.Fatalf("without a restriction: %d rollouts, %d rejected, diagnostics %v", len(all.Rollouts), len(all.Rejected), all.Diagnostics)
	}

	set := NewLoader(Limits{}).ForKubernetes().WatchNamespaces([]string{"team-a", "team-c"}).Load(sources)
	if len(set.Rollouts) != 1 || set.Rollouts[0].Key.String() != "team-a/in" {
		t.Fatalf("rollouts %v, want only team-a/in", set.Rollouts)
	}
	if len(set.Rejected) != 1 || set.Rejected[0].Key.String() != "team-b/out" {
		t.Fatalf("rejected %+v, want team-b/out", set.Rejected)
	}
	d := set.Rejected[0].Diagnostics[0]
	if d.File != "out.yaml" || d.Line != 4 || d.Field != "metadata.namespace" ||
		!strings.Contains(d.Message, `"team-b" is not watched`) || !strings.Contains(d.Message, "team-a,team-c") {
		t.Errorf("diagnostic %s", d)
	}
}
