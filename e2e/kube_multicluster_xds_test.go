package e2e

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// multiClusterXDSRollout is a canary across the fleet, one cluster a
// wave, whose traffic moves through sluice's xDS at host mx.e2e; each
// wave pauses at 50 % until promoted.
func multiClusterXDSRollout(ns, version, onFailure string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: mx
  namespace: %[1]s
  annotations:
    sluice.io/clusters: "region in (eu,us)"
    sluice.io/waves: "1,2,100%%"
    sluice.io/on-wave-failure: %[4]s
spec:
  replicas: 2
  selector: {matchLabels: {app: mx}}
  template:
    metadata: {labels: {app: mx}}
    spec:
      containers: [{name: app, image: %[2]q, ports: [{containerPort: %[3]d}]}]
  strategy:
    canary:
      scaleDownDelaySeconds: 2
      steps:
      - setWeight: 50
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds: {host: mx.e2e}
`, ns, version, kubePort, onFailure)
}

// clusterClient is one real xDS client that says it runs in a cluster.
type clusterClient struct {
	cluster string // "" for a client of no cluster
	impl    string
	c       xdsClient
}

// TestKubeMultiClusterXDS moves one rollout's traffic across three real
// control planes in waves, observed by real xDS clients of three
// implementations, each saying by its node locality which cluster it runs
// in (grpc-go in eu-1, gRPC C-core in us-1, grpc-js in eu-2, and a grpc-go
// client of no cluster). Every pod's backend answers with its version and
// its cluster, so a call tells which cluster's pod answered. sluice
// starts while eu-2 cannot be reached, so eu-2's part joins v1's plan
// once eu-2 is connected:
//   - eu-2's part takes the seat it was planned in, the last wave;
//   - every client reaches only its own cluster's pods (the client of no
//     cluster follows the last wave's cluster, eu-2);
//   - a wave's weight applies to its cluster's clients only: while eu-1's
//     part is at 50 %, eu-1's client splits v1/v2 and the others see v1;
//   - then us-1, then eu-2, each once the one before is promoted;
//   - v3 with on-wave-failure rollback-all, aborted in us-1 at 50 %:
//     eu-1's clients, on v3 until then, are back on v2, and eu-2's never
//     left it;
//   - no call fails.
func TestKubeMultiClusterXDS(t *testing.T) {
	f := startFleet(t)
	for name, c := range f.clusters {
		startTaggedPodBackends(t, c, f.ns, name)
	}
	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"rollouts/mx.yaml": multiClusterXDSRollout(f.ns, v1, "hold")})
	// sluice starts while eu-2 cannot be reached (a cut proxy between
	// them): v1 is planned with eu-2 last and eu-2's part is held back;
	// once eu-2 is connected its part must get that seat back, wave 3 of
	// 3, whose part serves the clients of no cluster. sluice probes more
	// often than it retries a connection (5 s), and the proxy is restored
	// once a first attempt failed: eu-2 is seen reachable, its pods the
	// fewest, before it is connected, as when a cluster is only slow to
	// connect at start (what CI once met). A new plan at that point put
	// eu-2 in wave 1 and left no last wave.
	eu2 := f.clusters["eu-2"]
	u, err := url.Parse(eu2.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := kubetest.NewCutProxy(t, u.Host)
	viaProxy := kubeconfigVia(t, eu2, proxy.Addr())
	flags := slices.Clone(f.flags)
	for i, flag := range flags {
		flags[i] = strings.Replace(flag, eu2.Kubeconfig, viaProxy, 1)
	}
	proxy.Cut()
	d := startDaemon(t, repo, append([]string{"--cluster-probe-interval", "500ms"}, flags...)...)
	for _, c := range []string{"eu-1", "us-1"} {
		d.waitStatus(f.ns+"/mx@"+c, 90*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
	}
	d.waitLog(`"msg":"cluster not reached; its rollouts' parts hold; retrying","cluster":"eu-2"`, 60*time.Second)
	proxy.Restore(t)
	eu2Part := d.waitStatus(f.ns+"/mx@eu-2", 90*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	if w := eu2Part.Wave; w == nil || w.Wave != 3 || w.Waves != 3 {
		t.Errorf("eu-2's part, connected late, seated %+v; want wave 3 of 3, the seat it was planned in", w)
	}

	impls := clientImpls(t) // grpc-go, Debian's C-core, ..., grpc-js
	goImpl, coreImpl, jsImpl := impls[0], impls[1], impls[len(impls)-1]
	region := map[string]string{"eu-1": "eu", "eu-2": "eu", "us-1": "us"}
	var clients []clusterClient
	for _, cc := range []struct {
		cluster string
		impl    clientImpl
	}{{"eu-1", goImpl}, {"us-1", coreImpl}, {"eu-2", jsImpl}, {"", goImpl}} {
		node := fmt.Sprintf("%s-in-%s", cc.impl.name, cc.cluster)
		boot := probe.BootstrapIn(d.xdsAddr, node, region[cc.cluster], cc.cluster)
		clients = append(clients, clusterClient{cluster: cc.cluster, impl: cc.impl.name, c: cc.impl.start(t, boot, "mx.e2e")})
	}
	// expect checks what every client observes: canaryIn is the cluster
	// whose part is at 50 % from old to next, done the clusters already
	// on next. A client
	// may apply an ACKed route a moment after its ACK (C-core polls an
	// idle channel), so a split that is not there yet is asked again, a
	// few times; a failed call or another cluster's pod fails at once.
	expect := func(when, old, next, canaryIn string, done ...string) {
		t.Helper()
		for _, cl := range clients {
			home := cl.cluster
			if home == "" {
				home = "eu-2" // the last wave's part serves clients of no cluster
			}
			var split string
			for attempt := 0; attempt < 5; attempt++ {
				o := cl.c.call(t, 200, nil)
				who := fmt.Sprintf("%s, %s client in %q: %v", when, cl.impl, cl.cluster, o)
				if o.failed() > 0 {
					t.Errorf("%s: failed calls", who)
				}
				for version := range o.Versions {
					if !strings.HasSuffix(version, "@"+home) {
						t.Errorf("%s: answered by another cluster's pod (%s)", who, version)
					}
				}
				if split = wrongSplit(o, home, old, next, canaryIn, done); split == "" {
					break
				}
				split = who + ": " + split
				time.Sleep(time.Second)
			}
			if split != "" {
				t.Error(split)
			}
		}
	}
	expect("v1 everywhere", v1, v2, "")

	repo.push("v2", map[string]string{"rollouts/mx.yaml": multiClusterXDSRollout(f.ns, v2, "hold")})
	var done []string
	for _, wave := range []string{"eu-1", "us-1", "eu-2"} {
		opened := time.Now()
		d.waitStatus(f.ns+"/mx@"+wave, 90*time.Second, wave+" paused at 50 %", func(s httpapi.RolloutStatus) bool {
			return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 50
		})
		t.Logf("wave %s: paused at 50 %% (ACKed by every client) %v after the push or the promotion before", wave, time.Since(opened).Round(10*time.Millisecond))
		expect("wave "+wave+" at 50 %", v1, v2, wave, done...)
		d.cli("promote", f.ns+"/mx@"+wave)
		d.waitStatus(f.ns+"/mx@"+wave, 90*time.Second, wave+" promoted", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
		})
		done = append(done, wave)
	}
	expect("every wave passed", v1, v2, "", done...)

	// v3, rollback-all: eu-1 holds at 100 % until us-1 aborts.
	const v3 = "e2e/app:v3"
	repo.push("v3", map[string]string{"rollouts/mx.yaml": multiClusterXDSRollout(f.ns, v3, "rollback-all")})
	d.waitStatus(f.ns+"/mx@eu-1", 90*time.Second, "eu-1 paused at 50 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 50
	})
	d.cli("promote", f.ns+"/mx@eu-1")
	d.waitStatus(f.ns+"/mx@us-1", 90*time.Second, "us-1 paused at 50 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 50
	})
	expect("v3: eu-1 held at 100 %, us-1 at 50 %", v2, v3, "us-1", "eu-1")
	d.cli("abort", f.ns+"/mx@us-1")
	d.waitStatus(f.ns+"/mx@eu-1", 60*time.Second, "eu-1 rolled back", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.StableVersion == v2 && s.Weights.Canary == 0
	})
	expect("v3 aborted in us-1 (rollback-all)", v2, v3, "")
}

// wrongSplit says how o differs from what a client of cluster home
// should observe while old goes to next ("" when it does not).
func wrongSplit(o observed, home, old, next, canaryIn string, done []string) string {
	switch {
	case home == canaryIn:
		if got := o.share(next + "@" + home); math.Abs(got-0.5) > 0.12 {
			return fmt.Sprintf("%.2f on %s, want 0.5 (its part at 50 %%)", got, next)
		}
	case slices.Contains(done, home):
		if got := o.share(next + "@" + home); got != 1 {
			return fmt.Sprintf("%.2f on %s, want all (its wave passed)", got, next)
		}
	default:
		if got := o.share(old + "@" + home); got != 1 {
			return fmt.Sprintf("%.2f on %s, want all (its wave has not started, or was rolled back)", got, old)
		}
	}
	return ""
}
