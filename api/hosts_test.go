package api

import (
	"strings"
	"testing"
)

func hostRollout(ns, name, host, endpoint string) Source {
	return Source{Name: ns + "-" + name + ".yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
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
          sluice.io/xds:
            host: ` + host + `
            endpoints: {"shop/app:v1": ["` + endpoint + `"]}
`)}
}

// TestHostClaimedTwice: finding N3. Two rollouts in different namespaces
// naming one sluice.io/xds host are a conflict: each claimant gets an
// error at its host field naming the other's file and line; both stay in
// the set (the controller picks the owner), and a lone host is no
// conflict.
func TestHostClaimedTwice(t *testing.T) {
	set := NewLoader(Limits{}).Load([]Source{
		hostRollout("default", "web", "web.shop", "127.0.0.1:9001"),
		hostRollout("intruder", "web", "web.shop", "10.66.66.66:80"),
		hostRollout("default", "api", "api.shop", "127.0.0.1:9002"),
	})
	if len(set.Rollouts) != 3 {
		t.Fatalf("rollouts %v: a conflict must not drop either claimant", set.Rollouts)
	}
	if len(set.HostConflicts) != 1 || set.HostConflicts[0].Host != "web.shop" || len(set.HostConflicts[0].Claims) != 2 {
		t.Fatalf("host conflicts %+v, want web.shop claimed by two", set.HostConflicts)
	}
	diags := set.HostDiagnostics()
	if len(diags) != 2 {
		t.Fatalf("diagnostics %v, want one per claimant", diags)
	}
	want := map[string]string{
		"default-web.yaml":  "rollout intruder/web (intruder-web.yaml:18)",
		"intruder-web.yaml": "rollout default/web (default-web.yaml:18)",
	}
	for _, d := range diags {
		if d.Line != 18 || d.Field != HostField || d.Severity != SeverityError || !strings.Contains(d.Message, want[d.File]) {
			t.Errorf("diagnostic %s; want line 18, field %s, naming %s", d, HostField, want[d.File])
		}
	}
}

// TestHostConflictOutsideWatchedNamespaces: a claimant that the
// namespace restriction rejects no longer conflicts.
func TestHostConflictOutsideWatchedNamespaces(t *testing.T) {
	set := NewLoader(Limits{}).WatchNamespaces([]string{"default"}).Load([]Source{
		hostRollout("default", "web", "web.shop", "127.0.0.1:9001"),
		hostRollout("intruder", "web", "web.shop", "10.66.66.66:80"),
	})
	if len(set.HostConflicts) != 0 {
		t.Errorf("host conflicts %+v, want none (intruder/web is rejected for its namespace)", set.HostConflicts)
	}
}
