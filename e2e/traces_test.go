package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestTracesCommitToVerdict: `sluice run` with the standard OTEL_*
// variables sends its traces to a real OpenTelemetry Collector. One commit
// starts two canaries: one passes its analysis and is promoted, the other
// fails it and is aborted. The commit's trace, read back from the
// collector's file exporter, is one tree: the commit's root with fetch,
// load and diff, a change per rollout, below it every step with its push,
// ACK and analysis measurements, and the verdict; and the abort alert's
// traceId is that trace's id.
func TestTracesCommitToVerdict(t *testing.T) {
	// Not parallel: t.Setenv hands the OTEL_* variables to the daemon.
	col := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.httpEndpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "sluice-e2e")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: spans reach the collector at once

	good1, good2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	bad1, bad2 := startBackend(t, v1, 0), startBackend(t, v2, 0.3)
	hook := startSink(t)
	repo := newGitRepo(t)
	steps := func(template string) string {
		return "- setWeight: 20\n- analysis:\n    templates: [{templateName: " + template + "}]\n- setWeight: 60\n"
	}
	good := rolloutSpec{Name: "good", Host: "good.e2e", Version: v1, Endpoints: map[string]string{v1: good1.grpc, v2: good2.grpc}, Steps: steps("web-good")}
	bad := rolloutSpec{Name: "bad", Host: "bad.e2e", Version: v1, Endpoints: map[string]string{v1: bad1.grpc, v2: bad2.grpc}, Steps: steps("web-bad")}
	files := func() map[string]string {
		return map[string]string{
			"rollouts/good.yaml": good.yaml(), "rollouts/bad.yaml": bad.yaml(),
			"analysis/good.yaml": webTemplate("web-good", "http://"+good2.http+"/stats"),
			"analysis/bad.yaml":  webTemplate("web-bad", "http://"+bad2.http+"/stats"),
		}
	}
	repo.push("v1", files())
	d := startDaemon(t, repo, "--alert-webhook", hook.srv.URL)
	for _, name := range []string{"good", "bad"} {
		d.waitStatus(name, 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
	}
	for _, spec := range []rolloutSpec{good, bad} {
		lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 1, Rate: 100})
		if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
			t.Fatal(err)
		}
	}

	good.Version, bad.Version = v2, v2
	commit := repo.push("v2", files())
	d.waitStatus("good", 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	d.waitStatus("bad", 90*time.Second, "v2 aborted", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Aborted
	})
	aborted := hook.wait(t, alert.EventRolloutAborted, "default/bad", 10*time.Second)
	if aborted.Commit != commit || len(aborted.TraceID) != 32 {
		t.Fatalf("rollout-aborted alert: commit %q traceId %q, want commit %s and a trace id", aborted.Commit, aborted.TraceID, commit)
	}
	d.stop() // flushes the spans still queued

	tree := waitTrace(t, col, aborted.TraceID, 2, 30*time.Second)
	root := tree.only(t, "", "commit")
	if root.attrs["sluice.commit"] != commit {
		t.Errorf("root span sluice.commit = %q, want %s", root.attrs["sluice.commit"], commit)
	}
	for _, name := range []string{"fetch", "load", "diff"} {
		tree.only(t, root.SpanID, name)
	}
	changes := tree.named(root.SpanID, "rollout.change")
	if len(changes) != 2 {
		t.Fatalf("root has %d rollout.change spans, want 2 (good, bad):\n%s", len(changes), tree)
	}
	for _, c := range changes {
		key := c.attrs["sluice.rollout"]
		t.Run(key, func(t *testing.T) {
			if c.attrs["sluice.commit"] != commit || c.attrs["sluice.change"] != "NewVersion" {
				t.Errorf("change span attributes %v", c.attrs)
			}
			steps := tree.named(c.SpanID, "step")
			want := 3
			if key == "default/bad" {
				want = 2 // aborted in its analysis step
			}
			if len(steps) != want {
				t.Fatalf("%s: %d step spans, want %d:\n%s", key, len(steps), want, tree)
			}
			byIndex := map[string]*span{}
			for _, s := range steps {
				byIndex[s.attrs["sluice.step.index"]] = s
				if s.attrs["sluice.rollout"] != key || s.attrs["sluice.commit"] != commit || s.attrs["sluice.version"] != v2 || s.attrs["sluice.step"] == "" {
					t.Errorf("step span attributes %v", s.attrs)
				}
			}
			// Step 0 (setWeight 20): its push, and the ACK below it.
			push := tree.only(t, byIndex["0"].SpanID, "xds.push")
			if push.attrs["sluice.weight.canary"] != "20" || push.attrs["sluice.weight.stable"] != "80" {
				t.Errorf("step 0 push weights %v", push.attrs)
			}
			ack := tree.only(t, push.SpanID, "xds.ack")
			if ack.attrs["sluice.verdict"] != "acked" {
				t.Errorf("step 0 ACK span %v", ack.attrs)
			}
			if n, _ := strconv.Atoi(ack.attrs["sluice.xds.clients"]); n < 2 {
				t.Errorf("ACK span sluice.xds.clients = %q, want the 2 connected load generators", ack.attrs["sluice.xds.clients"])
			}
			// Step 1 (analysis): the run, its measurements, its verdict.
			run := tree.only(t, byIndex["1"].SpanID, "analysis.run")
			measurements := tree.named(run.SpanID, "analysis.measurement")
			if len(measurements) == 0 {
				t.Errorf("analysis run has no measurement spans:\n%s", tree)
			}
			for _, m := range measurements {
				if m.attrs["sluice.metric"] != "success-rate" || m.attrs["sluice.value"] == "" {
					t.Errorf("measurement span %v", m.attrs)
				}
			}
			verdict := tree.only(t, c.SpanID, "verdict")
			wantRun, wantVerdict := "Successful", "promoted"
			if key == "default/bad" {
				wantRun, wantVerdict = "Failed", "aborted"
				if !strings.Contains(verdict.attrs["sluice.reason"], "success-rate") {
					t.Errorf("abort verdict reason %q does not name the metric", verdict.attrs["sluice.reason"])
				}
			}
			if run.attrs["sluice.verdict"] != wantRun || verdict.attrs["sluice.verdict"] != wantVerdict {
				t.Errorf("run verdict %q, rollout verdict %q; want %s, %s", run.attrs["sluice.verdict"], verdict.attrs["sluice.verdict"], wantRun, wantVerdict)
			}
		})
	}
}

// traceTree is one trace's spans.
type traceTree []*span

// waitTrace polls the collector's file until trace id has `verdicts`
// verdict spans (the last spans a canary makes), then returns the trace.
func waitTrace(t *testing.T, col *collector, id string, verdicts int, d time.Duration) traceTree {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var tree traceTree
		n := 0
		for _, s := range col.spans(t) {
			if s.TraceID == id {
				tree = append(tree, s)
				if s.Name == "verdict" {
					n++
				}
			}
		}
		if n >= verdicts {
			return tree
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s has %d verdict spans after %v, want %d:\n%s", id, n, d, verdicts, tree)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// named returns the children of parent ("" for roots) called name.
func (tr traceTree) named(parent, name string) []*span {
	var out []*span
	for _, s := range tr {
		if s.ParentSpanID == parent && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// only returns the one child of parent called name, failing otherwise.
func (tr traceTree) only(t *testing.T, parent, name string) *span {
	t.Helper()
	got := tr.named(parent, name)
	if len(got) != 1 {
		t.Fatalf("%d spans %q below %q, want 1:\n%s", len(got), name, parent, tr)
	}
	return got[0]
}

func (tr traceTree) String() string {
	var b strings.Builder
	for _, s := range tr {
		fmt.Fprintf(&b, "  %s parent=%s %s %v\n", s.SpanID, s.ParentSpanID, s.Name, s.attrs)
	}
	return b.String()
}
