package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/browsertest"
)

// dashboardWorld is a `sluice run` with an API token and two rollouts:
// "web", whose v2 is healthy and stops at a pause until promoted, and
// "bad", whose v2 fails half its requests so that its analysis aborts it.
type dashboardWorld struct {
	d        *daemon
	repo     *gitRepo
	web, bad rolloutSpec
	files    map[string]string
}

const dashboardToken = "dashboard-test-token"

func startDashboardWorld(t *testing.T) *dashboardWorld {
	t.Helper()
	webV1, webV2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	badV1, badV2 := startBackend(t, v1, 0), startBackend(t, v2, 0.5)
	w := &dashboardWorld{repo: newGitRepo(t)}
	w.web = rolloutSpec{Name: "web", Host: "web.e2e", Version: v1,
		Endpoints: map[string]string{v1: webV1.grpc, v2: webV2.grpc}, ManagedRoutes: []string{"testers"},
		Steps: `- setWeight: 20
- pause: {duration: 4s}
- setHeaderRoute:
    name: testers
    match:
    - headerName: x-canary
      headerValue: {exact: always}
- setWeight: 50
- pause: {}
`}
	w.bad = rolloutSpec{Name: "bad", Host: "bad.e2e", Version: v1,
		Endpoints: map[string]string{v1: badV1.grpc, v2: badV2.grpc},
		Steps: `- setWeight: 30
- analysis:
    templates: [{templateName: web-success}]
- pause: {}
`}
	w.files = map[string]string{
		"rollouts/web.yaml": w.web.yaml(),
		"rollouts/bad.yaml": w.bad.yaml(),
		"analysis/web.yaml": webTemplate("web-success", "http://"+badV2.http+"/stats"),
	}
	w.repo.push("v1", w.files)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(dashboardToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.d = startDaemon(t, w.repo, "--api-token-file", tokenFile)
	for _, name := range []string{"web", "bad"} {
		w.d.waitStatus(name, 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
	}
	for _, host := range []string{w.web.Host, w.bad.Host} {
		lg := startLoad(t, probe.LoadOptions{XDSServer: w.d.xdsAddr, Host: host, Clients: 1, Rate: 60})
		if _, err := lg.WaitFirst(ctxFor(t, 30*time.Second), v1); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// push makes version the image of the named rollouts in one commit.
func (w *dashboardWorld) push(version string, specs ...*rolloutSpec) {
	for _, s := range specs {
		s.Version = version
		w.files["rollouts/"+s.Name+".yaml"] = s.yaml()
	}
	w.repo.push(version, w.files)
}

// TestDashboard drives the page of a real `sluice run` in Chromium: the
// list, one rollout whose weights move while the canary goes on, promote
// refused without the right token and accepted with it, and an aborted
// rollout's failing measurements drawn against the success line, with the
// verdict written beside the plot. Screenshots are kept as artifacts.
func TestDashboard(t *testing.T) {
	t.Parallel()
	w := startDashboardWorld(t)
	br := browsertest.Start(t, 1280, 1000)

	// The list: both rollouts, filtered by phase.
	br.Do(30*time.Second, "open the list", chromedp.Navigate(w.d.url+"/ui/"))
	br.WaitText("#rows", "default/web", 10*time.Second)
	br.WaitText("#rows", "default/bad", 10*time.Second)
	br.WaitText("#count", "2 of 2 rollouts", 5*time.Second)
	br.Do(5*time.Second, "filter Degraded", chromedp.SetValue(chromedp.CSS("#f-phase"), "Degraded"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#f-phase").dispatchEvent(new Event("change"))`))
	br.WaitText("#count", "0 of 2 rollouts", 5*time.Second)
	br.Do(5*time.Second, "filter all", chromedp.SetValue(chromedp.CSS("#f-phase"), ""),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#f-phase").dispatchEvent(new Event("change"))`))
	br.WaitText("#count", "2 of 2 rollouts", 5*time.Second)
	// Each rollout's age, from the time sluice first saw it: seconds old.
	br.WaitJS(`!![...document.querySelectorAll('#rows td[data-label="Age"]')].map((td) => td.textContent).join(" ").match(/^\d+[smh] \d+[smh]$/)`,
		5*time.Second, func() string { return "the list shows no age in seconds: " + br.Text("#rows") })
	br.Screenshot("list")

	// One rollout: the weights follow the canary without a reload.
	br.Do(10*time.Second, "open web", chromedp.Click(chromedp.CSS(`a[href="#/r/default/web"]`)))
	br.WaitText("#weights", "canary 0%", 10*time.Second)
	w.push(v2, &w.web)
	br.WaitText("#weights", "canary 20%", 30*time.Second)
	br.WaitText("ol.steps li.current", "pause 4s", 10*time.Second)
	br.WaitText("#weights", "canary 50%", 30*time.Second)
	br.WaitText("ol.steps li.current", "pause (until promoted)", 20*time.Second)
	br.WaitText("#ack", "ACKed by every connected xDS client", 20*time.Second)
	// The load generator's xDS client, listed with the pushed routes ACKed.
	br.WaitText("#clients caption", "xDS clients (1)", 20*time.Second)
	br.WaitJS(`[...document.querySelectorAll("#clients tbody tr")].map((tr) => tr.querySelector(".cur").textContent).join() === "yes"`,
		20*time.Second, func() string { return "the xDS client is not listed as current: " + br.Text("#clients") })
	if st, _ := w.d.status("web"); len(st.Traffic.Clients) != 1 || !st.Traffic.Clients[0].Current || st.Traffic.ClientCount != 1 {
		t.Errorf("web's status lists the xDS clients %+v (%d), want the load generator's, current", st.Traffic.Clients, st.Traffic.ClientCount)
	}
	br.WaitText("#age", "Paused for", 5*time.Second)
	br.WaitText("#h-routes + ul", `x-canary = "always"`, 5*time.Second)

	// No token: the buttons are disabled and say why.
	var disabled bool
	br.Eval(`document.querySelector("#do-promote").disabled`, &disabled)
	if !disabled {
		t.Fatal("promote is enabled on a server that needs a token, with no token given")
	}
	if why := br.Text("#why-disabled"); !strings.Contains(why, "token") {
		t.Fatalf("disabled buttons say %q, want the reason (a token)", why)
	}
	br.Screenshot("rollout-paused")

	// A wrong token: the server refuses, the page says so, nothing moves.
	useToken(br, "wrong-token")
	br.DoOnRendered(10*time.Second, "press promote", chromedp.Click(chromedp.CSS("#do-promote")))
	if msg := br.Dialog(10 * time.Second); !strings.Contains(msg, "promote default/web") {
		t.Fatalf("confirmation says %q", msg)
	}
	br.WaitText("#result", "promote refused (401)", 10*time.Second)
	if st, _ := w.d.status("web"); st.Phase != rollout.PhasePaused || st.CanaryVersion != v2 {
		t.Fatalf("after a refused promote: %s %s, want still Paused on canary v2", st.Phase, st.Message)
	}

	// The right token, this time with the keyboard only: typed and
	// submitted with Enter, then promote focused and pressed with Enter.
	br.Do(10*time.Second, "type the token", chromedp.Evaluate[chromedp.Void](`document.querySelector("#token").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#token"), dashboardToken+"\r"))
	br.WaitJS(`sessionStorage.getItem("sluice-token") === `+strconv.Quote(dashboardToken), 5*time.Second,
		func() string { return "Enter in the token field did not keep the token" })
	br.DoOnRendered(10*time.Second, "press promote with Enter", chromedp.Focus(chromedp.CSS("#do-promote")), chromedp.KeyEvent("\r"))
	br.Dialog(10 * time.Second)
	br.WaitText("#result", "promote: done", 10*time.Second)
	br.WaitText("#phase", "Healthy", 30*time.Second)
	w.d.waitStatus("web", 30*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})

	// An aborted rollout: the failing measurements, the success line and
	// the verdict.
	br.Do(10*time.Second, "open bad", chromedp.Navigate(w.d.url+"/ui/#/r/default/bad"))
	br.WaitText("#phase", "Healthy", 10*time.Second)
	w.push(v2, &w.bad)
	br.WaitText("#phase", "Degraded", 60*time.Second)
	st, _ := w.d.status("bad")
	if !st.Aborted || len(st.AnalysisRuns) == 0 {
		t.Fatalf("bad: %+v, want aborted with an analysis run", st)
	}
	run := st.AnalysisRuns[len(st.AnalysisRuns)-1]
	br.WaitText(".run", run.Message, 10*time.Second)
	br.WaitText("ol.steps li.aborted", "analysis web-success", 5*time.Second)
	br.WaitText(".run", "success when result >= 0.95", 5*time.Second)
	br.WaitJS(`document.querySelectorAll(".run svg.plot circle.pt-Failed").length > 0 && !!document.querySelector(".run svg.plot line.succ")`,
		10*time.Second, func() string { return "no failed point and success line in the plot: " + br.Text(".run") })
	br.Screenshot("rollout-aborted")

	// A phone: the list fits the width.
	br.Do(10*time.Second, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(w.d.url+"/ui/#/"))
	br.WaitText("#rows", "default/bad", 10*time.Second)
	var overflow bool
	br.Eval(`document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("the list is wider than a 390 px phone screen")
	}
	br.Screenshot("list-phone")

	// The daemon goes away: the page says its data is stale.
	w.d.stop()
	br.WaitText("#live", "connection to sluice lost", 20*time.Second)
}

// useToken types the API token into the page's form and submits it.
func useToken(br *browsertest.Browser, token string) {
	br.Do(10*time.Second, "enter token", chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)))
	br.WaitText("#token-note", "token set", 5*time.Second)
}
