package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/leader"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// haReplicas is how many `sluice run --leader-elect` processes share the
// state; haKills how many times the leader is killed.
const (
	haReplicas = 3
	haKills    = 10 // two canaries through haPlan
	// haTakeover is the bound: a follower leads and serves within
	// the lease time + 5 s of the leader's death.
	haTakeover = leader.DefaultLeaseDuration + 5*time.Second
)

// haSteps: a timed pause, an analysis and a final pause, so that kills
// land in each.
const haSteps = `- setWeight: 25
- pause: {duration: 25s}
- analysis:
    templates: [{templateName: ha-success}]
- setWeight: 50
- pause: {}
`

// haPlan is where each kill lands, in story order (one canary per round).
// A failover takes about the lease (15 s), so the timed pause is long
// enough to be still running after a kill just before it.
var haPlan = []string{"pods", "timed pause", "analysis", "pause {}", "promoting"}

// haAtOrPast: the canary reached step (or went past it while a failover
// took its time: the kill then lands where the rollout is).
func haAtOrPast(step int32) func(httpapi.RolloutStatus) bool {
	return func(s httpapi.RolloutStatus) bool { return s.CanaryVersion == "" || s.StepIndex >= step }
}

func haAt(phase rollout.Phase, step int32) func(httpapi.RolloutStatus) bool {
	return func(s httpapi.RolloutStatus) bool { return s.Phase == phase && s.StepIndex == step }
}

// haRuns remembers every analysis run seen per commit: one that finished
// must stay finished with the same verdict, and a step's analysis must
// not pass twice (a repeated run).
type haRuns map[string]map[string]rollout.AnalysisPhase

func (h haRuns) see(t *testing.T, s httpapi.RolloutStatus) {
	t.Helper()
	if h[s.Commit] == nil {
		h[s.Commit] = map[string]rollout.AnalysisPhase{}
	}
	seen := h[s.Commit]
	for _, r := range s.AnalysisRuns {
		if was, ok := seen[r.Name]; ok && was == rollout.AnalysisSuccessful && r.Phase != was {
			t.Errorf("commit %s: analysis run %s was %s, now %s", s.Commit, r.Name, was, r.Phase)
		}
		seen[r.Name] = r.Phase
	}
	passed := 0
	for _, p := range seen {
		if p == rollout.AnalysisSuccessful {
			passed++
		}
	}
	if passed > 1 {
		t.Errorf("commit %s: the analysis step passed %d times (runs %v): a finished analysis was repeated", s.Commit, passed, seen)
	}
}

// haReplica is one replica process; each start has its own identity
// (POD_NAME), as a new pod would.
type haReplica struct {
	identity string
	cmd      *exec.Cmd
	log      *testkit.SyncBuffer
	exited   chan struct{}
	httpAddr string
	xdsAddr  string
	api      *client.Client
}

// haRig runs the replicas of one test.
type haRig struct {
	t      *testing.T
	c      *kubetest.Cluster
	dyn    dynamic.Interface
	ns     string
	repo   *gitRepo
	hook   *sink
	starts int
	// flags are added to every replica's command line.
	flags []string
	// replicas is appended to by the test's goroutine only; mu guards it
	// for live, which xDS Services call from theirs.
	mu       sync.Mutex
	replicas []*haReplica
}

// newHARig is a namespace of the shared control plane with sluice's CRD
// installed, a git repository, an alert sink and real backends on pod IPs,
// for replicas that h.start runs.
func newHARig(t *testing.T) *haRig {
	t.Helper()
	c := kubetest.Shared(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubestoretest.InstallCRD(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	h := &haRig{t: t, c: c, dyn: dyn, ns: c.Namespace(t), repo: newGitRepo(t), hook: startSink(t)}
	startPodBackends(t, c, h.ns)
	return h
}

func (h *haRig) start() *haReplica { return h.startWith(h.c.Kubeconfig) }

// startWith starts a replica that reaches the apiserver with kubeconfig.
func (h *haRig) startWith(kubeconfig string) *haReplica {
	t := h.t
	h.starts++
	r := &haReplica{identity: fmt.Sprintf("sluice-%d", h.starts), log: &testkit.SyncBuffer{}, exited: make(chan struct{}),
		httpAddr: testkit.FreeLoopbackAddr(t), xdsAddr: testkit.FreeLoopbackAddr(t)}
	r.cmd = exec.Command(sluiceBin, "run",
		"--repo", h.repo.origin, "--branch", "main", "--interval", "500ms",
		"--state-dir", filepath.Join(t.TempDir(), "state"),
		"--xds-addr", r.xdsAddr, "--http-addr", r.httpAddr,
		"--kubernetes", "--kubeconfig", kubeconfig,
		"--leader-elect", "--state-store", "kubernetes", "--namespace", h.ns, "--watch-namespaces", h.ns,
		"--alert-webhook", h.hook.srv.URL,
		"--analysis-allow-hosts", "127.0.0.1", // the web metric's stats server
		"--log-format", "json", "--log-level", "info")
	r.cmd.Args = append(r.cmd.Args, h.flags...)
	r.cmd.Env = append(os.Environ(), "POD_NAME="+r.identity)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	var err error
	if r.api, err = client.New(client.Options{Server: "http://" + r.httpAddr, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			t.Logf("%s log (last 30 lines):\n%s", r.identity, testkit.LastLines(r.log.String(), 30))
		}
	})
	h.mu.Lock()
	h.replicas = append(h.replicas, r)
	h.mu.Unlock()
	return r
}

// live is the replicas whose process runs, in start order.
func (h *haRig) live() []*haReplica {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*haReplica
	for _, r := range h.replicas {
		select {
		case <-r.exited:
		default:
			out = append(out, r)
		}
	}
	return out
}

// allReady waits until every live replica is Ready: the leader serves,
// and each follower serves xDS from the records it read.
func (h *haRig) allReady(within time.Duration) {
	h.t.Helper()
	kubetest.Eventually(h.t, within, "every replica Ready", func() (bool, string) {
		for _, r := range h.live() {
			if !ready(r) {
				return false, r.identity + " not Ready"
			}
		}
		return true, ""
	})
}

// leaderAndFollower pushes spec's v1, starts a leader and then a follower,
// and returns once the follower's xDS address accepts connections and v1
// is stable. Clients dial only then: a client refused before any xDS
// server listens is in gRPC's hands (its wait-for-ready calls fail when
// routes arrive); the follower binds before it reads the cluster, so its
// clients wait for routes there (TestFollowerXDSBindsBeforeSync).
func (h *haRig) leaderAndFollower(spec kubeRollout) (lead, follower *haReplica) {
	h.t.Helper()
	h.repo.push("v1", map[string]string{"rollouts/" + spec.Name + ".yaml": spec.yaml()})
	h.start()
	lead = h.leader(60 * time.Second)
	follower = h.start()
	waitFollowerXDS(h.t, follower)
	waitHA(h.t, h, spec.Namespace+"/"+spec.Name, 60*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	return lead, follower
}

// waitFollowerXDS returns once the follower's xDS address accepts
// connections.
func waitFollowerXDS(t *testing.T, follower *haReplica) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "the follower's xDS address accepts connections", func() (bool, string) {
		conn, err := net.DialTimeout("tcp", follower.xdsAddr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
}

// holder is the Lease's holder identity.
func (h *haRig) holder() string {
	l, err := h.c.Client.CoordinationV1().Leases(h.ns).Get(context.Background(), leader.LeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func ready(r *haReplica) bool {
	resp, err := http.Get("http://" + r.httpAddr + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// following asks r's /api/v1/info whether the replica that answers
// follows (its read-only API) rather than leads; ok is false when r does
// not answer.
func following(r *haReplica) (follows, ok bool) {
	resp, err := http.Get("http://" + r.httpAddr + "/api/v1/info")
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var info httpapi.Info
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return false, false
	}
	return info.Following, true
}

// leads says whether r's HTTP address is served by a leader's daemon that
// is ready: followers are Ready too, and a replica taking over answers as
// a follower until its daemon serves.
func leads(r *haReplica) bool {
	follows, ok := following(r)
	return ok && !follows && ready(r)
}

// leader waits until one live replica holds the Lease and serves as the
// leader, and checks that no other live replica serves as one.
func (h *haRig) leader(within time.Duration) *haReplica {
	h.t.Helper()
	var found *haReplica
	kubetest.Eventually(h.t, within, "a ready leader", func() (bool, string) {
		id := h.holder()
		for _, r := range h.replicas {
			select {
			case <-r.exited:
				continue
			default:
			}
			if r.identity == id && leads(r) {
				found = r
				return true, ""
			}
		}
		return false, "lease holder " + id
	})
	for _, r := range h.replicas {
		select {
		case <-r.exited:
			continue
		default:
		}
		if follows, ok := following(r); r != found && ok && !follows {
			h.t.Errorf("%s serves as the leader while %s leads", r.identity, found.identity)
		}
	}
	return found
}

func (h *haRig) status(r *haReplica, key string) (httpapi.RolloutStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.api.Get(ctx, api.ParseKey(key))
}

// TestKubeFailover runs three replicas on the cluster's state and kills the
// leader with SIGKILL at seeded random moments of canaries (a timed pause,
// waiting for the canary's pods, the final pause, promotion): each time
// another replica leads and serves within the lease + 5 s, and the
// rollout is where it was (same commit, no step lost, the weights of its
// step).
//
// Real gRPC xDS clients reach the replicas through one Service-like proxy
// per slot (xdsService): a client whose replica was killed reconnects
// through it to a live one, as through the chart's Service, and the test
// checks that it did. Every call from the clients' start to the end is
// kept and judged: none may fail, and each must be answered by a version
// that the rollout's records in the cluster routed traffic to around the
// call's start (a client left on dead routes, or a canary answering while
// its recorded weight was 0, fails this). At the end every expected alert
// arrived, no logical event came under two ids, and no id came twice
// unless the leader that sent it was killed before it could record the
// delivery (at least once: the id had reached the sink but was not marked
// delivered in the ConfigMap when the leader died).
func TestKubeFailover(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_FAILOVER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_FAILOVER_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with SLUICE_FAILOVER_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	h := newHARig(t)
	stats := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"successRate": 1}`)
	}))
	t.Cleanup(stats.Close)
	spec := kubeRollout{Name: "ha", Namespace: h.ns, Host: "ha.e2e", Version: v1, Replicas: 2, Steps: haSteps}
	key := h.ns + "/ha"
	// Templates are namespaced like the rollout.
	template := strings.Replace(webTemplate("ha-success", stats.URL), "metadata:\n", "metadata:\n  namespace: "+h.ns+"\n", 1)
	files := func() map[string]string {
		return map[string]string{"rollouts/ha.yaml": spec.yaml(), "analysis/web.yaml": template}
	}
	h.repo.push("v1", files())
	for range haReplicas {
		h.start()
	}
	lead := h.leader(60 * time.Second)
	waitHA(t, h, key, 60*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	h.allReady(30 * time.Second)
	records := watchRecords(t, h.dyn, h.ns, "ha")
	var groups []haClients
	for i := range haReplicas {
		svc := startXDSService(t, h.live, i)
		lg, calls := startLoggedLoad(t, probe.LoadOptions{XDSServer: svc.addr(), Host: spec.Host, Clients: 1, Rate: 40, NodePrefix: fmt.Sprintf("svc-%d", i)})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := lg.WaitFirst(ctx, v1); err != nil {
			t.Fatalf("clients behind Service %d never reached v1: %v", i, err)
		}
		cancel()
		groups = append(groups, haClients{name: fmt.Sprintf("Service %d", i), svc: svc, lg: lg, calls: calls})
	}

	versions := []string{v2, "e2e/app:v3", "e2e/app:v4"}
	var commits []string
	var failovers []time.Duration
	runs := haRuns{}
	again := redeliveries{}
	onVictim := 0 // Services whose clients were on the leader when it was killed
	for kill := 1; kill <= haKills; kill++ {
		target := haPlan[(kill-1)%len(haPlan)]
		switch target {
		case "pods":
			// Right after a push: the canary's ReplicaSet is being made
			// and its pods awaited.
			waitHA(t, h, key, 90*time.Second, "healthy before the push", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
			spec.Version = versions[len(commits)]
			commits = append(commits, h.repo.push(spec.Version, files()))
			waitHA(t, h, key, 30*time.Second, "canary started", func(s httpapi.RolloutStatus) bool { return s.CanaryVersion == spec.Version })
		case "promoting":
			waitHA(t, h, key, 90*time.Second, "final pause", haAt(rollout.PhasePaused, 4))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := lead.api.Command(ctx, api.ParseKey(key), "promote", false); err != nil {
				t.Fatalf("kill %d: promote: %v", kill, err)
			}
			cancel()
		case "timed pause":
			waitHA(t, h, key, 90*time.Second, target, haAtOrPast(1))
		case "analysis":
			waitHA(t, h, key, 90*time.Second, target, haAtOrPast(2))
		case "pause {}":
			waitHA(t, h, key, 90*time.Second, target, haAt(rollout.PhasePaused, 4))
		}
		time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
		before, err := h.status(lead, key)
		if err != nil {
			t.Fatalf("kill %d: status: %v", kill, err)
		}
		runs.see(t, before)
		if err := lead.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		<-lead.exited
		again.noteDeath(t, h)
		h.start() // the killed pod's replacement, a follower
		next := h.leader(haTakeover + 10*time.Second)
		took := time.Since(killed)
		failovers = append(failovers, took)
		if took > haTakeover {
			t.Errorf("kill %d: %s led and served %s after the kill, want within %s", kill, next.identity, took.Round(time.Millisecond), haTakeover)
		}
		after, err := h.status(next, key)
		if err != nil {
			t.Fatalf("kill %d: status from the new leader: %v", kill, err)
		}
		runs.see(t, after)
		t.Logf("kill %d in %q (%s step %d %v): %s leads after %s: %s step %d %v",
			kill, target, before.Phase, before.StepIndex, before.Weights, next.identity, took.Round(time.Millisecond), after.Phase, after.StepIndex, after.Weights)
		checkContinues(t, kill, before, after)
		for _, g := range groups {
			if g.checkReconnected(t, kill, lead, killed) {
				onVictim++
			}
		}
		lead = next
	}
	// Let the last canary finish, then judge the alerts.
	final := waitHA(t, h, key, 90*time.Second, "final pause or healthy", func(s httpapi.RolloutStatus) bool {
		runs.see(t, s)
		return s.Phase == rollout.PhaseHealthy || (s.Phase == rollout.PhasePaused && s.StepIndex == 4)
	})
	if final.Phase == rollout.PhasePaused {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := h.leader(30*time.Second).api.Command(ctx, api.ParseKey(key), "promote", false); err != nil {
			t.Fatal(err)
		}
		cancel()
		waitHA(t, h, key, 60*time.Second, "healthy", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	}
	if onVictim == 0 {
		t.Errorf("no clients were connected to a leader when it was killed: their reconnection was not tested")
	}
	t.Logf("%d times a Service's clients were on the leader when it was killed", onVictim)
	checkHAAlerts(t, h.hook, key, commits, again)
	// Calls go on past the promotion's settling by more than the lag
	// servedDuring allows, so that a client still routed to the old
	// version shows.
	time.Sleep(haCallLag + 2*time.Second)
	recs := records.all()
	t.Logf("%d records of %s written across the story", len(recs), key)
	for _, g := range groups {
		g.checkCalls(t, recs, spec.Version)
	}
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("failover over %d kills: p50 %s, max %s (lease %s)", len(failovers),
		failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond), leader.DefaultLeaseDuration)
}

// checkContinues: after a failover the rollout is at the same commit, at
// the same step or later (a timed pause may have ended in between), and
// its weights are those of a step it reached, never a lost one.
func checkContinues(t *testing.T, kill int, before, after httpapi.RolloutStatus) {
	t.Helper()
	if after.Commit != before.Commit && before.Phase != rollout.PhaseHealthy {
		t.Errorf("kill %d: commit %s after the failover, was %s", kill, after.Commit, before.Commit)
	}
	if after.Commit == before.Commit && after.CanaryVersion != "" && after.StepIndex < before.StepIndex {
		t.Errorf("kill %d: step %d after the failover, was %d: a step was repeated", kill, after.StepIndex, before.StepIndex)
	}
	// Weights may only have moved forward: a promotion in progress goes on
	// when the canary's pods become Ready during the failover (the canary
	// takes more traffic, or becomes the stable at 100 %).
	movedForward := after.Weights.Canary > before.Weights.Canary ||
		(before.CanaryVersion != "" && after.StableVersion == before.CanaryVersion)
	if after.Commit == before.Commit && after.StepIndex == before.StepIndex && after.Phase == before.Phase &&
		after.Weights != before.Weights && !movedForward {
		t.Errorf("kill %d: weights %v at the same step after the failover, were %v", kill, after.Weights, before.Weights)
	}
}

// waitHA polls whichever replica leads for the rollout's status (a
// follower's may lag behind it).
func waitHA(t *testing.T, h *haRig, key string, within time.Duration, what string, cond func(httpapi.RolloutStatus) bool) httpapi.RolloutStatus {
	t.Helper()
	var last httpapi.RolloutStatus
	kubetest.Eventually(t, within, key+" "+what, func() (bool, string) {
		for _, r := range h.replicas {
			if !leads(r) {
				continue
			}
			st, err := h.status(r, key)
			if err != nil {
				return false, err.Error()
			}
			last = st
			return cond(st), fmt.Sprintf("%s step %d weights %v: %s", st.Phase, st.StepIndex, st.Weights, st.Message)
		}
		return false, "no replica serves as the leader"
	})
	return last
}
