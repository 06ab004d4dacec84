package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// blueGreenRollout writes a blue-green Rollout (replicas 2, promoted by
// `sluice promote`) for the e2e tests.
type blueGreenRollout struct {
	Name, Namespace, Version string
	// Annotations are the lines under metadata.annotations, unindented.
	Annotations string
	// Active and Preview are the Services (activeService, previewService).
	Active, Preview string
	// Extra are more blueGreen fields, unindented.
	Extra string
}

func (r blueGreenRollout) yaml() string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations:
%[3]sspec:
  replicas: 2
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: app
        image: %[4]q
        ports: [{containerPort: %[5]d}]
  strategy:
    blueGreen:
      activeService: %[6]s
      previewService: %[7]s
      autoPromotionEnabled: false
%[8]s`, r.Name, orDefault(r.Namespace), indent(r.Annotations, 4), r.Version, kubePort, r.Active, r.Preview, indentOpt(r.Extra, 6))
}

func orDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// gatedAnalyses are blueGreen fields: the gate template (gateTemplate)
// before and after the switch.
const gatedAnalyses = `prePromotionAnalysis:
  templates: [{templateName: gate}]
  args: [{name: phase, value: pre}]
postPromotionAnalysis:
  templates: [{templateName: gate}]
  args: [{name: phase, value: post}]
`

// blueGreenYAML is the standalone blue-green rollout bg: its hosts, the
// active bg.e2e and the preview preview.bg.e2e, and each version's
// endpoints are in the sluice.io/xds annotation; the gate decides before
// and after the switch.
func blueGreenYAML(version string, endpoints map[string]string) string {
	xds := "sluice.io/xds: |\n  host: bg.e2e\n  previewHost: preview.bg.e2e\n  endpoints:\n"
	for v, addr := range endpoints {
		xds += fmt.Sprintf("    %q: [%q]\n", v, addr)
	}
	return blueGreenRollout{Name: "bg", Version: version, Annotations: xds, Active: "bg", Preview: "bg-preview", Extra: gatedAnalyses}.yaml()
}

// gateTemplate asks url/<phase> whether the version is good.
func gateTemplate(ns, url string) string { return argGateTemplate("gate", ns, url, "phase") }

// argGateTemplate is a one-measurement web gate named name that asks
// url/{{args.<arg>}} and passes on {"ok": true}.
func argGateTemplate(name, ns, url, arg string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  args:
  - name: %[4]s
  metrics:
  - name: gate
    count: 1
    successCondition: result.ok == true
    provider:
      web:
        url: %[3]s/{{args.%[4]s}}
        jsonPath: "{$}"
`, name, orDefault(ns), url, arg)
}

// TestBlueGreenOverXDS: a blue-green rollout observed by real gRPC xDS
// clients of both hosts. Before promotion the preview host answers with the
// new version and the active host with the old; `sluice promote` switches
// the active host in one ACKed change; a failing post-promotion analysis
// switches it back.
func TestBlueGreenOverXDS(t *testing.T) {
	t.Parallel()
	const v3 = "e2e/app:v3"
	b1, b2, b3 := startBackend(t, v1, 0), startBackend(t, v2, 0), startBackend(t, v3, 0)
	eps := map[string]string{v1: b1.grpc, v2: b2.grpc, v3: b3.grpc}
	var postOK atomic.Bool
	postOK.Store(true)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.URL.Path == "/pre" || r.URL.Path == "/post" && postOK.Load()
		fmt.Fprintf(w, `{"ok": %t}`, ok)
	}))
	t.Cleanup(gate.Close)

	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"bg.yaml": blueGreenYAML(v1, eps), "gate.yaml": gateTemplate("", gate.URL)})
	d := startDaemon(t, repo)
	d.waitStatus("bg", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	requireOnly(t, d, "bg.e2e", v1)
	requireOnly(t, d, "preview.bg.e2e", v1)

	// v2: the preview host reaches v2 while the active host stays on v1.
	commit := repo.push("v2", map[string]string{"bg.yaml": blueGreenYAML(v2, eps)})
	d.waitStatus("bg", 60*time.Second, "paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused
	})
	requireOnly(t, d, "preview.bg.e2e", v2)
	requireOnly(t, d, "bg.e2e", v1)

	d.cli("promote", "bg")
	d.waitStatus("bg", 60*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	requireOnly(t, d, "bg.e2e", v2)
	requireOnly(t, d, "preview.bg.e2e", v2)

	// v3: promoted, then its post-promotion analysis fails: the active
	// host goes back to v2, which kept running.
	postOK.Store(false)
	commit = repo.push("v3", map[string]string{"bg.yaml": blueGreenYAML(v3, eps)})
	d.waitStatus("bg", 60*time.Second, "paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused
	})
	requireOnly(t, d, "preview.bg.e2e", v3)
	d.cli("promote", "bg")
	d.waitStatus("bg", 60*time.Second, "aborted by the post-promotion analysis", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.StableVersion == v2
	})
	requireOnly(t, d, "bg.e2e", v2)
	requireOnly(t, d, "preview.bg.e2e", v2)
}

// requireOnly checks that real xDS clients of host are answered by version
// alone.
func requireOnly(t *testing.T, d *daemon, host, version string) {
	t.Helper()
	split := clientsAnswer(t, d.xdsAddr, host, 200)
	if split[version].OK != split.Total() {
		t.Fatalf("clients of %s were answered %v; want %s only", host, split, version)
	}
}
