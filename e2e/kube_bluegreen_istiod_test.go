package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// bgRouteYAML is a blue-green rollout that switches through the Gateway
// API route bgm (sluice.io/traffic-routing), with Services bgm-active and
// bgm-preview.
func bgRouteYAML(ns, version string) string {
	return blueGreenRollout{Name: "bgm", Namespace: ns, Version: version, Active: "bgm-active", Preview: "bgm-preview",
		Annotations: "sluice.io/traffic-routing: |\n  plugins:\n    argoproj-labs/gatewayAPI: {grpcRoute: bgm}\n",
		Extra:       "scaleDownDelaySeconds: 3\n",
	}.yaml()
}

// TestKubeBlueGreenIstiod: a blue-green rollout whose switch is a weight
// flip on a GAMMA GRPCRoute, against a real istiod. Proxyless gRPC
// clients of istiod calling the route's parent Service bgm observe the
// old version until promotion and the new one after, all calls answered;
// clients of the preview Service reach the new version before promotion;
// an abort flips the route back.
func TestKubeBlueGreenIstiod(t *testing.T) {
	w := newGammaWorld(t)
	ns := w.ns
	for _, svc := range []string{"bgm", "bgm-active", "bgm-preview"} {
		w.service(t, svc, map[string]string{"app": "bgm"})
	}
	w.grpcRoute(t, "bgm", "bgm-active", serviceParent("bgm"))
	w.waitServed(t, "bgm", 1)

	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"rollouts/bgm.yaml": bgRouteYAML(ns, v1)})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", w.c.Kubeconfig, "--watch-namespaces", ns, "--ack-timeout", "2m")
	key := ns + "/bgm"
	d.waitStatus(key, 90*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	clients := newMeshClients(t, w.ist.XDSAddr, ns, fmt.Sprintf("bgm.%s.svc.cluster.local:%d", ns, kubePort), 2)
	preview := newMeshClients(t, w.ist.XDSAddr, ns, fmt.Sprintf("bgm-preview.%s.svc.cluster.local:%d", ns, kubePort), 1)
	const n = 500
	observedSplit(t, clients, v1, v2, 0, n)

	commit := repo.push("v2", map[string]string{"rollouts/bgm.yaml": bgRouteYAML(ns, v2)})
	d.waitStatus(key, 90*time.Second, "paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused
	})
	observedSplit(t, clients, v1, v2, 0, n)
	observedSplit(t, preview, v1, v2, 1, n)

	d.cli("promote", key)
	d.waitStatus(key, 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	observedSplit(t, clients, v1, v2, 1, n)
	waitReplicaSet(t, w.c, ns, "bgm", v1, 0, 30*time.Second)
	observedSplit(t, clients, v1, v2, 1, n)

	const v3 = "e2e/app:v3"
	repo.push("v3", map[string]string{"rollouts/bgm.yaml": bgRouteYAML(ns, v3)})
	d.waitStatus(key, 90*time.Second, "v3 paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Phase == rollout.PhasePaused
	})
	observedSplit(t, preview, v2, v3, 1, n)
	d.cli("abort", key)
	d.waitStatus(key, 60*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.StableVersion == v2
	})
	observedSplit(t, clients, v2, v3, 0, n)
}
