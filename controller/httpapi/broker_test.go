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

// A status event that changes only what the summary leaves out (here the
// pod counts of its ReplicaSets), or an alert repeated word for word, is
// not added to the history: sluice get rollout does not show it either
// (view.Repeats), and it would push older events out. The run's first
// keeps its seq and time and takes the newest status; anything that
// differs in type, message or summary is added.
func TestBrokerHistoryKeepsARunOfRepeatsOnce(t *testing.T) {
	b := NewBroker(BrokerOptions{Keep: 20})
	key := Event{Namespace: "default", Name: "a"}.Key()
	status := func(step int32, ready int32) *RolloutStatus {
		st := goldenStatus(t)
		st.StepIndex = step
		st.ReplicaSets = []rollout.ReplicaSetStatus{{Version: "v2", Ready: ready}}
		return &st
	}
	publish := func(typ, msg string, st *RolloutStatus) Event {
		return b.Publish(Event{Namespace: "default", Name: "a", Type: typ, Message: msg, Status: st})
	}
	first := publish("status", "paused", status(2, 0))
	newest := status(2, 3)
	publish("status", "paused", status(2, 1))
	publish("status", "paused", newest)
	r := b.Recent(key)
	if len(r) != 1 {
		t.Fatalf("history of a run of repeats = %v, want one event", messages(r))
	}
	if r[0].Seq != first.Seq || !r[0].Time.Equal(first.Time) || r[0].Status != newest {
		t.Errorf("kept %d with status %p, want the first's seq %d and the newest status %p", r[0].Seq, r[0].Status, first.Seq, newest)
	}

	publish("step-completed", "step 3/6", nil)
	publish("step-completed", "step 3/6", nil)
	publish("status", "paused", status(2, 4)) // after another event: added
	publish("status", "paused", status(3, 4)) // another step: added
	publish("status", "resumed", status(3, 4))
	publish("command", "resumed", status(3, 4))
	r = b.Recent(key)
	want := []string{"status paused", "step-completed step 3/6", "status paused", "status paused", "status resumed", "command resumed"}
	if got := typesAndMessages(r); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("history = %q, want %q", got, want)
	}
	for i, e := range r {
		whole := e.Status != nil && e.Status.Steps != nil
		if whole != (i == len(r)-1) {
			t.Errorf("event %d (%s %s): whole status %v, want only the newest whole", i, e.Type, e.Message, whole)
		}
		if e.Namespace != "default" || e.Name != "a" {
			t.Errorf("event %d names %s/%s, want default/a", i, e.Namespace, e.Name)
		}
	}
}

func typesAndMessages(r []Event) []string {
	out := make([]string, len(r))
	for i, e := range r {
		out[i] = e.Type + " " + e.Message
	}
	return out
}

func messages(r []Event) []string {
	out := make([]string, len(r))
	for i, e := range r {
		out[i] = e.Message
	}
	return out
}

// BenchmarkBrokerHistory publishes -rollouts' worth of events until every
// rollout's history is full, and reports the heap the histories hold
// afterwards per rollout: status events alone (the golden status, a step
// apart each), and a status and an alert (which carries no status) per
// step, as a canary's steps publish them. No event repeats another.
func BenchmarkBrokerHistory(b *testing.B) {
	for _, c := range []struct {
		name   string
		alerts bool
	}{{"statuses", false}, {"statuses+alerts", true}} {
		b.Run(c.name, func(b *testing.B) {
			const rollouts, perRollout = 1000, 20
			var held float64
			for b.Loop() {
				before := heapAfterGC()
				br := NewBroker(BrokerOptions{})
				for i := range perRollout {
					for n := range rollouts {
						name := fmt.Sprintf("svc-%04d", n)
						if c.alerts && i%2 == 1 {
							br.Publish(Event{Namespace: "default", Name: name, Type: "step-completed", Message: fmt.Sprintf("step %d/20: setWeight %d", i, i*5)})
							continue
						}
						s := goldenStatus(b)
						s.StepIndex = int32(i)
						br.Publish(Event{Namespace: "default", Name: name, Type: "status", Status: &s})
					}
				}
				held = float64(heapAfterGC()-before) / rollouts
				runtime.KeepAlive(br)
			}
			b.ReportMetric(held, "heldB/rollout")
		})
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
