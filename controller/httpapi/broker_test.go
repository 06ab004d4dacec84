package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// goldenStatus is the DESIGN §5 example status (testdata/status.golden),
// a canary paused at step 3 of 6 with an analysis run and a header route,
// given the timeline its six steps make; each call builds a status of its
// own, as the daemon does for every event.
func goldenStatus(t testing.TB) RolloutStatus {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "status.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var st RolloutStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"setWeight 10", "pause 30s", "setHeaderRoute testers", "analysis success-rate", "setWeight 50", "pause"} {
		state := map[bool]string{true: "done", false: "pending"}[i < int(st.StepIndex)]
		st.Steps = append(st.Steps, rollout.StepStatus{Name: strings.Clone(name), State: state})
	}
	if len(st.Steps) == 0 || len(st.AnalysisRuns) == 0 || len(st.HeaderRoutes) == 0 {
		t.Fatalf("golden status lost its lists: %+v", st)
	}
	return st
}

func TestBrokerHistoryKeepsOnlyTheNewestStatusWhole(t *testing.T) {
	b := NewBroker(BrokerOptions{Keep: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.Subscribe(ctx)
	var published []*RolloutStatus
	for i := range 6 {
		st := goldenStatus(t)
		st.StepIndex = int32(i)
		st.Message = fmt.Sprintf("status %d", i)
		published = append(published, &st)
		b.Publish(Event{Namespace: "default", Name: "a", Type: "status", Message: st.Message, Status: &st})
		if i == 4 {
			b.Publish(Event{Namespace: "default", Name: "a", Type: "step-completed", Message: "no status"})
		}
	}

	r := b.Recent(Event{Namespace: "default", Name: "a"}.Key())
	if len(r) != 4 || r[0].Message != "status 3" || r[2].Type != "step-completed" || r[3].Message != "status 5" {
		t.Fatalf("recent = %v, want status 3, status 4, step-completed, status 5", messages(r))
	}
	if whole := r[3].Status; whole != published[5] {
		t.Errorf("newest status event does not hold the status as published")
	}
	for _, e := range r[:2] {
		s := e.Status
		if s == nil {
			t.Fatalf("%s: status gone, want its summary", e.Message)
		}
		if s.Steps != nil || s.AnalysisRuns != nil || s.HeaderRoutes != nil {
			t.Errorf("%s: older event keeps the status' lists (%d steps, %d runs)", e.Message, len(s.Steps), len(s.AnalysisRuns))
		}
		want := published[s.StepIndex]
		if s.Phase != want.Phase || s.Weights != want.Weights || s.StepCount != want.StepCount || s.CanaryVersion != want.CanaryVersion || s.Message != e.Message {
			t.Errorf("%s: summary %+v lost what it must keep of %+v", e.Message, *s, *want)
		}
	}
	// What subscribers were handed is never changed afterwards.
	for i := range 7 {
		e := <-ch
		if e.Status != nil && (len(e.Status.Steps) == 0 || e.Status != published[e.Status.StepIndex]) {
			t.Errorf("event %d reached the subscriber cut down or changed: %+v", i, e.Status)
		}
	}
	for i, st := range published {
		if len(st.Steps) == 0 {
			t.Errorf("published status %d was cut down in place", i)
		}
	}
}

func messages(r []Event) []string {
	out := make([]string, len(r))
	for i, e := range r {
		out[i] = e.Message
	}
	return out
}

// BenchmarkBrokerHistory publishes -rollouts' worth of status events (the
// golden status) until every rollout's history is full, and reports the
// heap the histories hold afterwards per rollout.
func BenchmarkBrokerHistory(b *testing.B) {
	const rollouts, perRollout = 1000, 20
	var held float64
	for b.Loop() {
		before := heapAfterGC()
		br := NewBroker(BrokerOptions{})
		for i := range perRollout {
			for n := range rollouts {
				s := goldenStatus(b)
				s.StepIndex = int32(i)
				br.Publish(Event{Namespace: "default", Name: fmt.Sprintf("svc-%04d", n), Type: "status", Status: &s})
			}
		}
		held = float64(heapAfterGC()-before) / rollouts
		runtime.KeepAlive(br)
	}
	b.ReportMetric(held, "heldB/rollout")
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
