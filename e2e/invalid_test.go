package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestInvalidStrategyMidRollout: while a canary waits at 30 %, a push
// breaks the rollout's file. sluice rejects it with file:line in status and
// an alert, the clients keep seeing 30 %, and the rollout goes on with the
// previous good strategy when promoted.
func TestInvalidStrategyMidRollout(t *testing.T) {
	t.Parallel()
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	hook := startSink(t)
	repo := newGitRepo(t)
	const file = "rollouts/edit.yaml"
	good := rolloutSpec{Name: "edit", Host: "edit.e2e", Version: v1, Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc},
		Steps: "- setWeight: 30\n- pause: {}\n- setWeight: 50\n- pause: {duration: 1s}\n"}
	repo.push("v1", map[string]string{file: good.yaml()})
	d := startDaemon(t, repo, "--alert-webhook", hook.srv.URL)
	d.waitStatus("edit", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: good.Host, Clients: 1, Rate: 150})

	good.Version = v2
	repo.push("v2", map[string]string{file: good.yaml()})
	d.waitStatus("edit", 30*time.Second, "pause at 30%", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 1
	})

	bad := good
	bad.Steps = strings.Replace(good.Steps, "setWeight: 50", "setWeight: 150", 1)
	badYAML := bad.yaml()
	line := lineOf(t, badYAML, "setWeight: 150")
	badCommit := repo.push("break the strategy", map[string]string{file: badYAML})
	st := d.waitStatus("edit", 30*time.Second, "load error in status", func(s httpapi.RolloutStatus) bool { return len(s.Errors) > 0 })
	e := st.Errors[0]
	if e.File != file || e.Line != line || !strings.Contains(e.Field, "setWeight") {
		t.Errorf("status error %+v, want %s:%d on setWeight", e, file, line)
	}
	if st.Phase != rollout.PhasePaused || st.StepIndex != 1 || st.Weights.Canary != 30 || st.CanaryVersion != v2 {
		t.Errorf("the rejected push moved the rollout: %+v", st)
	}
	if !strings.Contains(st.Message, badCommit[:7]) {
		t.Errorf("status message %q does not name the rejected commit %s", st.Message, badCommit[:7])
	}
	a := hook.wait(t, alert.EventStrategyInvalid, "default/edit", 10*time.Second)
	if want := fmt.Sprintf("%s:%d", file, line); !strings.Contains(a.Reason, want) {
		t.Errorf("strategy-invalid alert reason %q lacks %s", a.Reason, want)
	}
	if got := observe(t, lg, 40).Class[probe.DefaultClass].Share(v2); math.Abs(got-0.3) > 0.08 {
		t.Errorf("clients saw %.2f on v2 after the rejected push, want 0.30", got)
	}

	// The previous good strategy continues: promote leaves the pause, then
	// setWeight 50 and a 1s pause run, and the rollout completes.
	d.cli("promote", "edit")
	d.waitStatus("edit", 30*time.Second, "completion on the good strategy", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if got := observe(t, lg, 20).Class[probe.DefaultClass].Share(v2); got != 1 {
		t.Errorf("after completion clients saw %.2f on v2", got)
	}
}
