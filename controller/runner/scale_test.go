package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// heldWorkloads is a Workloads double at the edge: every Scale waits for
// release (a busy API server), and it counts what it was asked.
type heldWorkloads struct {
	release chan struct{}
	once    sync.Once
	fail    func(a rollout.ScaleWorkloads) error // nil: every apply succeeds

	mu       sync.Mutex
	inFlight int
	maxIn    int
	landed   []string // "<rollout> gen=<n>", in the order the applies ended
	resent   map[api.Key]int
}

func newHeldWorkloads() *heldWorkloads {
	return &heldWorkloads{release: make(chan struct{}), resent: map[api.Key]int{}}
}

// open lets every Scale through, now and from now on.
func (w *heldWorkloads) open() { w.once.Do(func() { close(w.release) }) }

func (w *heldWorkloads) Scale(ctx context.Context, a rollout.ScaleWorkloads) error {
	w.mu.Lock()
	w.inFlight++
	w.maxIn = max(w.maxIn, w.inFlight)
	w.mu.Unlock()
	// Cancelling does not stop a request the API server already has: it
	// lands when it lands.
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	if w.fail != nil {
		if err := w.fail(a); err != nil {
			return err
		}
	}
	w.landed = append(w.landed, fmt.Sprintf("%s gen=%d", a.Rollout.Name, a.Gen))
	return nil
}

func (w *heldWorkloads) Resend(key api.Key) {
	w.mu.Lock()
	w.resent[key]++
	w.mu.Unlock()
}

func (w *heldWorkloads) snapshot() (landed []string, maxIn int, resent map[api.Key]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.landed), w.maxIn, func() map[api.Key]int {
		out := map[api.Key]int{}
		for k, v := range w.resent {
			out[k] = v
		}
		return out
	}()
}

// TestScalesWaitWithoutGoroutines: the ScaleWorkloads of 2,000 rollouts
// waiting on a busy API server take a bounded number of goroutines and
// applies in flight (a goroutine each made a 1,000-rollout change's peak
// RSS), and every one is applied, and re-reported, once it answers.
func TestScalesWaitWithoutGoroutines(t *testing.T) {
	w := newHeldWorkloads()
	e := newEnv(t, envOptions{workloads: w})
	t.Cleanup(w.open) // before Close, which waits for the held applies
	before := runtime.NumGoroutine()
	const n = 2000
	keys := make([]api.Key, n)
	for i := range n {
		keys[i] = api.Key{Namespace: "default", Name: fmt.Sprintf("r%04d", i)}
		e.runner.execute(newEntry(rollout.State{Key: keys[i]}), []rollout.Action{rollout.ScaleWorkloads{Rollout: keys[i], Gen: 1}}, time.Now())
	}
	eventually(t, "the workers hold applies", func() bool {
		_, maxIn, _ := w.snapshot()
		return maxIn >= DefaultScaleWorkers
	})
	if grown := runtime.NumGoroutine() - before; grown > DefaultScaleWorkers+16 {
		t.Fatalf("%d goroutines more while %d applies wait, want about %d (the workers)", grown, n, DefaultScaleWorkers)
	}
	w.open()
	eventually(t, "every apply lands", func() bool {
		landed, _, _ := w.snapshot()
		return len(landed) == n
	})
	landed, maxIn, resent := w.snapshot()
	if maxIn > DefaultScaleWorkers {
		t.Fatalf("%d applies in flight at once, want at most %d", maxIn, DefaultScaleWorkers)
	}
	if len(landed) != n {
		t.Fatalf("%d applies landed, want %d", len(landed), n)
	}
	eventually(t, "every rollout re-reported", func() bool {
		_, _, resent = w.snapshot()
		return len(resent) == n
	})
	for _, k := range keys {
		if resent[k] != 1 {
			t.Fatalf("rollout %s re-reported %d times, want once after its apply", k, resent[k])
		}
	}
}

// TestSupersededScaleNeverLandsLast: a newer ScaleWorkloads of a rollout
// is applied only once the superseded apply, still in flight at the API
// server, has ended: applied at once beside it, the older one could land
// last and leave the ReplicaSets as the machine no longer wants them.
func TestSupersededScaleNeverLandsLast(t *testing.T) {
	w := newHeldWorkloads()
	e := newEnv(t, envOptions{workloads: w})
	t.Cleanup(w.open)
	key := api.Key{Namespace: "default", Name: "latest"}
	ent := newEntry(rollout.State{Key: key})
	e.runner.execute(ent, []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 1}}, time.Now())
	eventually(t, "gen 1 in flight", func() bool {
		_, maxIn, _ := w.snapshot()
		return maxIn == 1
	})
	e.runner.execute(ent, []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 2}}, time.Now())
	e.runner.execute(ent, []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 3}}, time.Now())
	time.Sleep(100 * time.Millisecond)
	if _, maxIn, _ := w.snapshot(); maxIn != 1 {
		t.Fatalf("%d applies of one rollout in flight at once, want 1", maxIn)
	}
	w.open()
	eventually(t, "the newest apply lands", func() bool {
		landed, _, _ := w.snapshot()
		return len(landed) > 0 && landed[len(landed)-1] == "latest gen=3"
	})
	landed, _, _ := w.snapshot()
	// gen 1 was at the API server when superseded; gen 2 never started.
	if want := []string{"latest gen=1", "latest gen=3"}; !slices.Equal(landed, want) {
		t.Fatalf("applies landed %v, want %v", landed, want)
	}
	select {
	case <-ent.scaleDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the newest apply's job did not end")
	}
}

// TestRefusedScalesHoldNoWorker: rollouts whose apply the cluster keeps
// refusing wait out their back-off without a worker, so another rollout's
// apply goes ahead, and a refused one is retried until it lands.
func TestRefusedScalesHoldNoWorker(t *testing.T) {
	w := newHeldWorkloads()
	w.open()
	var mu sync.Mutex
	refuse := true
	w.fail = func(a rollout.ScaleWorkloads) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse && a.Rollout.Name != "free" {
			return errors.New("admission webhook denied the request")
		}
		return nil
	}
	e := newEnv(t, envOptions{workloads: w})
	e.runner.scales.mu.Lock()
	e.runner.scales.workers = 2
	e.runner.scales.mu.Unlock()
	for i := range 4 {
		key := api.Key{Namespace: "default", Name: fmt.Sprintf("refused%d", i)}
		e.runner.execute(newEntry(rollout.State{Key: key}), []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 1}}, time.Now())
	}
	time.Sleep(100 * time.Millisecond) // every refused apply tried once, now backing off
	free := api.Key{Namespace: "default", Name: "free"}
	e.runner.execute(newEntry(rollout.State{Key: free}), []rollout.Action{rollout.ScaleWorkloads{Rollout: free, Gen: 1}}, time.Now())
	deadline := time.Now().Add(scaleRetryMin / 2)
	eventually(t, "the free rollout's apply lands", func() bool {
		landed, _, _ := w.snapshot()
		return slices.Contains(landed, "free gen=1")
	})
	if time.Now().After(deadline) {
		t.Fatalf("the free rollout's apply waited for the refused ones' back-off")
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	eventually(t, "the refused applies land once accepted", func() bool {
		landed, _, _ := w.snapshot()
		return len(landed) == 5
	})
}

// TestCloseEndsBackedOffScales: Close does not wait out a back-off.
func TestCloseEndsBackedOffScales(t *testing.T) {
	w := newHeldWorkloads()
	w.open()
	w.fail = func(rollout.ScaleWorkloads) error { return errors.New("apiserver unavailable") }
	e := newEnv(t, envOptions{workloads: w})
	key := api.Key{Namespace: "default", Name: "down"}
	ent := newEntry(rollout.State{Key: key})
	e.runner.mu.Lock()
	e.runner.rollouts[key] = ent
	e.runner.mu.Unlock()
	e.runner.execute(ent, []rollout.Action{rollout.ScaleWorkloads{Rollout: key, Gen: 1}}, time.Now())
	time.Sleep(2 * scaleRetryMin) // tried twice, in its second back-off
	start := time.Now()
	if err := e.runner.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > scaleRetryMin {
		t.Fatalf("Close took %v: it waited out the back-off", d)
	}
	select {
	case <-ent.scaleDone:
	default:
		t.Fatal("Close returned with the apply's job not ended")
	}
}
