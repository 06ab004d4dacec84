package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestKubeFollowerAPI: with the state in the cluster, a follower is Ready
// once it serves, serves the leader's statuses (phase, step, weights,
// versions) on the read API and its event stream, and refuses a promote
// with 503 naming the leader. Then the leader is killed: a client that
// polls the follower's /healthz with a new connection each time (as
// kubelet's probes) sees no failed poll while the follower takes over,
// the HTTP listener being handed to its daemon rather than bound again.
func TestKubeFollowerAPI(t *testing.T) {
	h := newHARig(t)
	spec := kubeRollout{Name: "fa", Namespace: h.ns, Host: "fa.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 20\n- pause: {}\n- setWeight: 60\n- pause: {}\n"}
	key := h.ns + "/fa"
	h.repo.push("v1", map[string]string{"rollouts/fa.yaml": spec.yaml()})
	h.start()
	lead := h.leader(60 * time.Second)
	follower := h.start()
	kubetest.Eventually(t, 60*time.Second, "the follower is Ready", func() (bool, string) {
		return ready(follower), "/readyz not 200"
	})
	if follows, ok := following(follower); !ok || !follows {
		t.Fatalf("the follower's /api/v1/info: following=%v (answered %v), want following", follows, ok)
	}
	waitHA(t, h, key, 60*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	events := followStream(t, follower, key)

	spec.Version = v2
	h.repo.push("v2", map[string]string{"rollouts/fa.yaml": spec.yaml()})
	waitHA(t, h, key, 60*time.Second, "canary at 20%", haAt(rollout.PhasePaused, 1))
	sameOnFollower(t, h, lead, follower, key)

	t.Run("promote on the follower", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := follower.api.Command(ctx, api.ParseKey(key), "promote", false)
		var apiErr *client.Error
		if !errors.Is(err, httpapi.ErrNotLeader) || !errors.As(err, &apiErr) || apiErr.Code != http.StatusServiceUnavailable ||
			apiErr.Leader != lead.identity || !strings.Contains(err.Error(), lead.identity) {
			t.Fatalf("promote on the follower: %v, want 503 naming the leader %s", err, lead.identity)
		}
		if st, _ := h.status(lead, key); st.StepIndex != 1 || st.Phase != rollout.PhasePaused {
			t.Errorf("after the refused promote the leader is at %s step %d, want still Paused at step 1", st.Phase, st.StepIndex)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := lead.api.Command(ctx, api.ParseKey(key), "promote", false); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitHA(t, h, key, 60*time.Second, "canary at 60%", haAt(rollout.PhasePaused, 3))
	sameOnFollower(t, h, lead, follower, key)
	select {
	case e := <-events.at(3):
		if e.Status.Weights.Canary != 60 {
			t.Errorf("the follower's stream at step 3: weights %v, want 60%% on the canary", e.Status.Weights)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the follower's event stream never showed step 3; saw %v", events.steps())
	}

	t.Run("HTTP listener handed over on takeover", func(t *testing.T) {
		polls := pollHealthz(follower.httpAddr)
		if err := lead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if next := h.leader(haTakeover + 10*time.Second); next != follower {
			t.Fatalf("%s leads, want the follower %s", next.identity, follower.identity)
		}
		n, failed, slowest := polls.stop()
		t.Logf("%d /healthz polls during the takeover, slowest %s", n, slowest.Round(time.Millisecond))
		if len(failed) > 0 {
			t.Errorf("%d of %d /healthz polls failed during the takeover, first: %v", len(failed), n, failed[0])
		}
		st, err := h.status(follower, key)
		if err != nil || st.StepIndex != 3 {
			t.Errorf("the new leader's status: step %d, %v; want step 3", st.StepIndex, err)
		}
	})
}

// sameOnFollower: the follower's status of key equals the leader's in
// what a step decides (it may lag the leader's by a record write).
func sameOnFollower(t *testing.T, h *haRig, lead, follower *haReplica, key string) {
	t.Helper()
	fields := func(s httpapi.RolloutStatus) string {
		return fmt.Sprintf("%s step %d/%d weights %v stable %s canary %s commit %s", s.Phase, s.StepIndex, s.StepCount, s.Weights,
			s.StableVersion, s.CanaryVersion, s.Commit)
	}
	want, err := h.status(lead, key)
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 10*time.Second, "the follower serves the leader's status "+fields(want), func() (bool, string) {
		got, err := h.status(follower, key)
		if err != nil {
			return false, err.Error()
		}
		return fields(got) == fields(want), fields(got)
	})
}

// streamSeen collects the steps of the statuses seen on an event stream.
type streamSeen struct {
	mu      sync.Mutex
	seen    []httpapi.Event
	waiting map[int32]chan httpapi.Event
}

// followStream reads r's event stream for key until the test ends.
func followStream(t *testing.T, r *haReplica, key string) *streamSeen {
	s := &streamSeen{waiting: map[int32]chan httpapi.Event{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	k := api.ParseKey(key)
	connected := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.api.Stream(ctx, &k, func() error { close(connected); return nil }, func(e httpapi.Event) error {
			if e.Status != nil {
				s.saw(e)
			}
			return nil
		})
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's event stream did not open")
	}
	return s
}

func (s *streamSeen) saw(e httpapi.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, e)
	if ch, ok := s.waiting[e.Status.StepIndex]; ok {
		select {
		case ch <- e:
		default:
		}
	}
}

// at is fed the first event at step, seen already or to come.
func (s *streamSeen) at(step int32) <-chan httpapi.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan httpapi.Event, 1)
	for _, e := range s.seen {
		if e.Status.StepIndex == step {
			ch <- e
			return ch
		}
	}
	s.waiting[step] = ch
	return ch
}

func (s *streamSeen) steps() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var steps []int32
	for _, e := range s.seen {
		steps = append(steps, e.Status.StepIndex)
	}
	return steps
}

// healthzPolls polls /healthz with a new connection each time, as a
// kubelet probe does, recording failures and the slowest answer.
type healthzPolls struct {
	quit, done chan struct{}
	n          atomic.Int64
	mu         sync.Mutex
	failed     []error
	slowest    time.Duration
}

func pollHealthz(addr string) *healthzPolls {
	p := &healthzPolls{quit: make(chan struct{}), done: make(chan struct{})}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.quit:
				return
			default:
			}
			start := time.Now()
			resp, err := c.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("/healthz answered %d", resp.StatusCode)
				}
			}
			p.n.Add(1)
			p.mu.Lock()
			if err != nil {
				p.failed = append(p.failed, err)
			}
			p.slowest = max(p.slowest, time.Since(start))
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // pacing, not synchronisation
		}
	}()
	return p
}

func (p *healthzPolls) stop() (n int64, failed []error, slowest time.Duration) {
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n.Load(), p.failed, p.slowest
}
