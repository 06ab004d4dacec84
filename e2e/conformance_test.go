package e2e

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/testkit"
)

const v3 = "e2e/app:v3"

// conformanceSteps: 90/10, then a header route, a cookie route and a mirror
// route on top, then a pause until `sluice promote`.
const conformanceSteps = `- setWeight: 10
- setHeaderRoute:
    name: testers
    match:
    - headerName: x-canary
      headerValue: {exact: always}
- setHeaderRoute:
    name: beta
    match:
    - headerName: cookie
      headerValue: {exact: beta=on}
- setMirrorRoute:
    name: shadow
    percentage: 100
    match:
    - headers: {x-mirror: {exact: "yes"}}
- pause: {}
`

const (
	conformancePause = 4    // the step index of the pause
	splitCalls       = 2000 // calls behind the observed 90/10 split
	routeCalls       = 200  // calls behind each route's check
)

// TestXDSClientConformance runs one traffic suite against every xDS client
// implementation we can run (grpc-go, gRPC C-core through Debian's
// python3-grpcio, grpc-js with @grpc/grpc-js-xds): each is a real xDS
// client bootstrapped to sluice, calling real probe backends. Per client:
// the split at 90/10 over 2,000 calls within binomial noise, header,
// cookie and sticky-cookie routes, the mirror route (copies where the
// client mirrors, otherwise routed by the weights with no copies), sluice
// restarted while the clients stay up (they keep their routes and
// reconnect), promote, a NACKed update that leaves the NACKing client on
// its last good routes (and holds the step), and abort. No client NACKs
// anything sluice serves itself. It logs per client the first-call
// latency, the observed split and the features it lacks.
func TestXDSClientConformance(t *testing.T) {
	t.Parallel()
	for _, impl := range clientImpls(t) {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			conform(t, impl)
		})
	}
}

func conform(t *testing.T, impl clientImpl) {
	began := time.Now()
	phase := func(name string) { t.Logf("%s: %s at %v", impl.name, name, time.Since(began).Round(time.Millisecond)) }
	b1, b2, b3 := startBackend(t, v1, 0), startBackend(t, v2, 0), startBackend(t, v3, 0)
	repo := newGitRepo(t)
	spec := rolloutSpec{Name: "conf", Host: "conf.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc, v3: b3.grpc}, Steps: conformanceSteps,
		ManagedRoutes: []string{"testers", "beta", "shadow"}, StickyCookie: "sluice-canary"}
	repo.push("v1", map[string]string{"rollouts/conf.yaml": spec.yaml()})
	flags := []string{"--state-dir", t.TempDir()}
	d := startDaemon(t, repo, flags...)
	flags = append(flags, "--xds-addr", d.xdsAddr, "--http-addr", d.httpAddr) // a restart binds them again
	d.waitStatus("conf", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})

	// Two clients of the implementation: one straight to sluice, one through
	// the proxy that can make it NACK.
	proxy := startNACKProxy(t, d.xdsAddr)
	direct := impl.start(t, probe.Bootstrap(d.xdsAddr, impl.name+"-direct"), spec.Host)
	proxied := impl.start(t, probe.Bootstrap(proxy.addr, impl.name+"-proxied"), spec.Host)
	for name, c := range map[string]xdsClient{"direct": direct, "proxied": proxied} {
		if got := c.call(t, 100, nil); got.share(v1) != 1 {
			t.Fatalf("%s client before the canary: %v, want all on v1", name, got)
		}
	}

	phase("clients ready")
	// The canary's steps: weights, header, cookie and mirror routes.
	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/conf.yaml": spec.yaml()})
	d.waitStatus("conf", 60*time.Second, "paused at 10% with its routes", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused && s.StepIndex == conformancePause && s.Weights.Canary == 10
	})
	split := direct.call(t, splitCalls, nil)
	checkSplit(t, "90/10", split, v2, 0.10)
	allOn(t, "header route x-canary: always", direct.call(t, routeCalls, map[string]string{"x-canary": "always"}), v2)
	allOn(t, "cookie route beta=on", direct.call(t, routeCalls, map[string]string{"cookie": "session=abc; beta=on"}), v2)
	allOn(t, "sticky cookie sluice-canary=canary", direct.call(t, routeCalls, map[string]string{"cookie": "sluice-canary=canary"}), v2)
	if off := direct.call(t, routeCalls, map[string]string{"cookie": "beta=off; sluice-canary=stable"}); off.Versions[v1] == 0 || off.failed() > 0 {
		t.Errorf("cookies that match no route must follow the weights: %v", off)
	}
	lacks := checkMirror(t, impl, direct, b1, b2)
	checkSplit(t, "90/10 through the proxy", proxied.call(t, 500, nil), v2, 0.10)
	if n := d.metric("sluice_xds_nacks_total"); n != 0 {
		t.Fatalf("%s NACKed what sluice served (sluice_xds_nacks_total = %v):\n%s", impl.name, n, testkit.LastLines(d.log.String(), 20))
	}

	phase("canary checked")
	// sluice restarts; meanwhile the clients keep their routes.
	d.stop()
	ackTimeouts := strings.Count(d.log.String(), "xds ack timed out")
	checkSplit(t, "90/10 while sluice is down", direct.call(t, 500, nil), v2, 0.10)
	allOn(t, "header route while sluice is down", direct.call(t, 50, map[string]string{"x-canary": "always"}), v2)
	d = startDaemon(t, repo, flags...)
	d.waitStatus("conf", 60*time.Second, "paused at 10% again after the restart", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused && s.StepIndex == conformancePause && s.Weights.Canary == 10
	})

	phase("restarted")
	// Promote: only clients that reconnected after the restart see it.
	promoted := time.Now()
	d.cli("promote", "conf")
	d.waitStatus("conf", 30*time.Second, "promoted to v2", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	toV2 := waitAllOn(t, "after promote", direct, v2)
	t.Logf("%s: promote to all calls on v2 (reconnect after the restart included): %v", impl.name, toV2.Sub(promoted).Round(time.Millisecond))
	waitAllOn(t, "after promote (through the proxy)", proxied, v2)
	allOn(t, "header route after promote", direct.call(t, routeCalls, map[string]string{"x-canary": "always"}), v2)

	phase("promoted")
	// A NACKed update: the proxied client rejects v3's first weight and
	// keeps its last good routes, all on v2; sluice holds the step.
	proxy.armed.Store(true)
	spec.Version = v3
	repo.push("v3", map[string]string{"rollouts/conf.yaml": spec.yaml()})
	d.waitStatus("conf", 60*time.Second, "v3 at 10% held by the NACK", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Weights.Canary == 10 && strings.Contains(s.Message, "NACK")
	})
	allOn(t, "NACKing client keeps its last good routes", proxied.call(t, 500, nil), v2)
	checkSplit(t, "90/10 on the client that accepted v3's weights", direct.call(t, 500, nil), v3, 0.10)
	if proxy.broken.Load() == 0 {
		t.Fatal("the proxy broke no route table")
	}

	phase("NACK checked")
	// Abort: everyone back on v2, the NACKing client too once it gets a
	// route table it accepts.
	proxy.armed.Store(false)
	d.cli("abort", "conf")
	d.waitStatus("conf", 30*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.Aborted && s.Weights.Stable == 100
	})
	waitAllOn(t, "after abort", direct, v2)
	waitAllOn(t, "after abort (the client that NACKed)", proxied, v2)

	// Steps that went on without every client's ACK: an update that reached
	// a client late (or never) shows here, not as a failure.
	ackTimeouts += strings.Count(d.log.String(), "xds ack timed out")
	t.Logf("%s: steps that went on after an xDS ACK timeout (--ack-timeout 10s): %d", impl.name, ackTimeouts)

	t.Logf("%s: first call %v (direct), %v (proxied); 90/10 observed %.1f/%.1f over %d calls; lacks: %s",
		impl.name, direct.firstCall().Round(time.Millisecond), proxied.firstCall().Round(time.Millisecond),
		100*split.share(v1), 100*split.share(v2), split.answered()+split.failed(), strings.Join(lacks, ", "))
}

// checkSplit fails unless no call failed and version's share is within
// 4.5 binomial standard deviations of p.
func checkSplit(t *testing.T, what string, got observed, version string, p float64) {
	t.Helper()
	n := got.answered() + got.failed()
	tol := 4.5 * math.Sqrt(p*(1-p)/float64(n))
	if got.failed() > 0 || math.Abs(got.share(version)-p) > tol {
		t.Errorf("%s: %v; want %.2f on %s within %.3f and no failures", what, got, p, version, tol)
	}
}

// allOn fails unless every call was answered by version.
func allOn(t *testing.T, what string, got observed, version string) {
	t.Helper()
	if got.share(version) != 1 {
		t.Errorf("%s: %v, want every call on %s", what, got, version)
	}
}

// waitAllOn calls until a batch of 100 is all answered by version (routes
// reach clients asynchronously) and returns when.
func waitAllOn(t *testing.T, what string, c xdsClient, version string) time.Time {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got := c.call(t, 100, nil)
		if got.share(version) == 1 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 45s, want every call on %s", what, got, version)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMirror sends calls matching the mirror route (100 % mirrored to
// the canary) and counts the requests the backends received beyond the
// calls answered: the copies. A client that mirrors sends one per call; one
// that does not must route them by the weights and send none. It returns
// the features the client lacks.
func checkMirror(t *testing.T, impl clientImpl, c xdsClient, stable, canary *backend) []string {
	t.Helper()
	before := stable.Stats().TotalRequests + canary.Stats().TotalRequests
	got := c.call(t, 400, map[string]string{"x-mirror": "yes"})
	// Copies are fire-and-forget: give them a moment to land.
	time.Sleep(500 * time.Millisecond)
	copies := stable.Stats().TotalRequests + canary.Stats().TotalRequests - before - int64(got.answered())
	if got.failed() > 0 || got.Versions[v1] == 0 {
		t.Errorf("mirror route: %v; its calls must follow the weights (90/10) without failing", got)
	}
	if impl.mirrors {
		if copies < int64(got.answered())*9/10 {
			t.Errorf("mirror route: %d copies of %d calls reached the canary; %s mirrors", copies, got.answered(), impl.name)
		}
		return nil
	}
	if copies != 0 {
		t.Errorf("mirror route: %d copies of %d calls reached the canary; %s was thought not to mirror", copies, got.answered(), impl.name)
	}
	return []string{"request mirroring (request_mirror_policies ignored: the mirror route's calls follow the weights, no copies)"}
}
