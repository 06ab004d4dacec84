package runner

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// workGoroutines counts the goroutines running or waiting in
// Runner.work, from the process's goroutine profile.
func workGoroutines(t *testing.T) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b.Bytes(), []byte("runner.(*Runner).work("))
}

// TestWorkersServeRolloutsInTurn: rollouts busy one after the other are
// served by the workers that finished the earlier ones (a goroutine kept
// between rollouts keeps its grown stack), not one goroutine per rollout;
// Close ends the workers that wait for a rollout.
func TestWorkersServeRolloutsInTurn(t *testing.T) {
	e := newEnv(t, envOptions{})
	const n = 30
	for i := range n {
		k := api.Key{Namespace: "turns", Name: fmt.Sprintf("r%d", i)}
		startStable(e, k)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.runner.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	got := workGoroutines(t)
	if got == 0 || got >= n/3 {
		t.Errorf("after %d rollouts served in turn, %d worker goroutines wait, want between 1 and %d", n, got, n/3-1)
	}
	e.close()
	if got := workGoroutines(t); got != 0 {
		t.Errorf("after Close, %d worker goroutines are left, want 0", got)
	}
}
