package rollout

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// This file is a small interpreter for scenario scripts (testdata/*.txt),
// in the spirit of etcd raft's interaction tests: a script line "> cmd"
// feeds one event to Step, and the lines after it are what Step did.

var testKey = api.Key{Namespace: "default", Name: "checkout"}

// harness drives one rollout through Step.
type harness struct {
	specs map[string]*api.Rollout
	state State
	acts  []Action
}

// newHarness starts like the runner does: from a state holding only the key.
func newHarness() *harness {
	return &harness{specs: map[string]*api.Rollout{}, state: State{Key: testKey}}
}

// parseArgs splits `a b=c d="e f"` into positional words and key=value
// pairs; values may be Go-quoted.
func parseArgs(line string) (words []string, kv map[string]string, err error) {
	kv = map[string]string{}
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		end := 0
		inQuote := false
		for end < len(line) && (inQuote || line[end] != ' ') {
			if line[end] == '"' && (end == 0 || line[end-1] != '\\') {
				inQuote = !inQuote
			}
			end++
		}
		tok := line[:end]
		line = line[end:]
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			words = append(words, tok)
			continue
		}
		if strings.HasPrefix(v, `"`) {
			if v, err = strconv.Unquote(v); err != nil {
				return nil, nil, fmt.Errorf("unquote %s: %w", tok, err)
			}
		}
		kv[k] = v
	}
	return words, kv, nil
}

// parseSteps reads "setWeight 20; pause 30s; pause; analysis a+b;
// header NAME h=v; header NAME; mirror NAME 50; mirror NAME; scale".
// Parts joined by "&" make one step with several types ("setWeight 20 &
// header NAME h=v"): the first part gives the step's Kind.
func parseSteps(s string) ([]api.Step, error) {
	var steps []api.Step
	for _, step := range strings.Split(s, ";") {
		var parts []api.Step
		for _, part := range strings.Split(step, "&") {
			p, err := parseStepPart(part)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p...)
		}
		if len(parts) > 0 {
			steps = append(steps, mergeStepParts(parts))
		}
	}
	return steps, nil
}

// mergeStepParts makes one step of several single-type ones.
func mergeStepParts(parts []api.Step) api.Step {
	out := parts[0]
	for _, p := range parts[1:] {
		switch {
		case p.Kind == api.StepSetWeight:
			out.Weight = p.Weight
		case p.Pause != nil:
			out.Pause = p.Pause
		case p.Analysis != nil:
			out.Analysis = p.Analysis
		case p.HeaderRoute != nil:
			out.HeaderRoute = p.HeaderRoute
		case p.MirrorRoute != nil:
			out.MirrorRoute = p.MirrorRoute
		case p.CanaryScale != nil:
			out.CanaryScale = p.CanaryScale
		case p.Experiment != nil:
			out.Experiment = p.Experiment
		}
	}
	return out
}

// parseStepPart reads one part of a step: none or one step.
func parseStepPart(part string) ([]api.Step, error) {
	var steps []api.Step
	f := strings.Fields(part)
	if len(f) == 0 {
		return nil, nil
	}
	switch f[0] {
	case "setWeight":
		w, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, err
		}
		steps = append(steps, api.Step{Kind: api.StepSetWeight, Weight: int32(w)})
	case "pause":
		p := &api.Pause{}
		if len(f) > 1 {
			d, err := time.ParseDuration(f[1])
			if err != nil {
				return nil, err
			}
			p.Duration = d
		}
		steps = append(steps, api.Step{Kind: api.StepPause, Pause: p})
	case "analysis":
		steps = append(steps, api.Step{Kind: api.StepAnalysis, Analysis: analysisOf(f[1])})
	case "header":
		hr := &api.HeaderRoute{Name: f[1]}
		for _, m := range f[2:] {
			k, v, _ := strings.Cut(m, "=")
			hr.Match = append(hr.Match, api.HeaderMatch{HeaderName: k, HeaderValue: api.StringMatch{Exact: v}})
		}
		steps = append(steps, api.Step{Kind: api.StepSetHeaderRoute, HeaderRoute: hr})
	case "mirror":
		mr := &api.MirrorRoute{Name: f[1]}
		if len(f) > 2 {
			p, err := strconv.Atoi(f[2])
			if err != nil {
				return nil, err
			}
			mr.Percentage = int32(p)
			mr.Match = []api.RouteMatch{{Path: &api.StringMatch{Prefix: "/"}}}
		}
		steps = append(steps, api.Step{Kind: api.StepSetMirrorRoute, MirrorRoute: mr})
	case "experiment":
		e, err := experimentOf(f[1:])
		if err != nil {
			return nil, err
		}
		steps = append(steps, api.Step{Kind: api.StepExperiment, Experiment: e})
	case "scale":
		scs, err := canaryScaleOf(f[1:])
		if err != nil {
			return nil, err
		}
		steps = append(steps, api.Step{Kind: api.StepSetCanaryScale, CanaryScale: scs})
	default:
		return nil, fmt.Errorf("unknown step %q", f[0])
	}
	return steps, nil
}

// experimentOf reads an experiment step: "experiment NAME:REF[:N],...
// [DURATION] [ANALYSIS=TEMPLATE[!]]...", e.g. "experiment
// base:stable,cand:canary:2 10s cmp=judge!" (a "!" marks an analysis
// required for completion; its args name the canary template's hash).
func experimentOf(args []string) (*api.Experiment, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("experiment needs templates")
	}
	e := &api.Experiment{}
	for _, t := range strings.Split(args[0], ",") {
		parts := strings.Split(t, ":")
		tmpl := api.ExperimentTemplate{Name: parts[0], SpecRef: api.SpecRefCanary, Replicas: 1}
		if len(parts) > 1 {
			tmpl.SpecRef = api.SpecRef(parts[1])
		}
		if len(parts) > 2 {
			n, err := strconv.Atoi(parts[2])
			if err != nil {
				return nil, fmt.Errorf("experiment template %s: %w", t, err)
			}
			tmpl.Replicas = int32(n)
		}
		e.Templates = append(e.Templates, tmpl)
	}
	for _, a := range args[1:] {
		name, tmpl, ok := strings.Cut(a, "=")
		if !ok {
			d, err := time.ParseDuration(a)
			if err != nil {
				return nil, fmt.Errorf("experiment: %q is neither a duration nor ANALYSIS=TEMPLATE", a)
			}
			e.Duration = d
			continue
		}
		required := strings.HasSuffix(tmpl, "!")
		an := analysisOf(strings.TrimSuffix(tmpl, "!"))
		an.Args = []api.Arg{{Name: "exp-hash", Value: "{{templates." + e.Templates[len(e.Templates)-1].Name + ".podTemplateHash}}"}}
		e.Analyses = append(e.Analyses, api.ExperimentAnalysis{Name: name, Analysis: *an, RequiredForCompletion: required})
	}
	return e, nil
}

// canaryScaleOf reads setCanaryScale: "scale" (replicas 1), "scale 3"
// (replicas), "scale 25%" (weight) or "scale match" (matchTrafficWeight).
func canaryScaleOf(args []string) (*api.CanaryScale, error) {
	if len(args) == 0 {
		r := int32(1)
		return &api.CanaryScale{Replicas: &r}, nil
	}
	a := args[0]
	if a == "match" {
		return &api.CanaryScale{MatchTrafficWeight: true}, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(a, "%"))
	if err != nil {
		return nil, fmt.Errorf("scale %s: %w", a, err)
	}
	v := int32(n)
	if strings.HasSuffix(a, "%") {
		return &api.CanaryScale{Weight: &v}, nil
	}
	return &api.CanaryScale{Replicas: &v}, nil
}

// workloadOf builds the Kubernetes-mode part of a spec from `hash=H
// replicas=N dss=true min=N deadline=D deadlineAbort=true delay=D
// abortDelay=D baseline=B` (baseline=B: the rollout wants a baseline,
// and B is this version's baseline hash); nil without hash= (standalone
// mode).
func workloadOf(kv map[string]string) (*api.Workload, error) {
	if kv["hash"] == "" {
		return nil, nil
	}
	w := &api.Workload{
		PodTemplateHash:       kv["hash"],
		DynamicStableScale:    kv["dss"] == "true",
		MinPodsPerReplicaSet:  api.DefaultMinPodsPerReplicaSet,
		ProgressDeadline:      10 * time.Minute,
		ProgressDeadlineAbort: kv["deadlineAbort"] == "true",
		ScaleDownDelay:        api.DefaultScaleDownDelay,
		AbortScaleDownDelay:   api.DefaultAbortScaleDownDelay,
		RevisionHistoryLimit:  api.DefaultRevisionHistoryLimit,
		Baseline:              kv["baseline"] != "",
		BaselineHash:          kv["baseline"],
	}
	if v, ok := kv["min"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("min: %w", err)
		}
		w.MinPodsPerReplicaSet = int32(n)
	}
	for key, d := range map[string]*time.Duration{"deadline": &w.ProgressDeadline, "delay": &w.ScaleDownDelay, "abortDelay": &w.AbortScaleDownDelay} {
		if v, ok := kv[key]; ok {
			p, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			*d = p
		}
	}
	return w, nil
}

func analysisOf(names string) *api.Analysis {
	a := &api.Analysis{}
	for _, n := range strings.Split(names, "+") {
		a.Templates = append(a.Templates, api.TemplateRef{Name: n})
	}
	return a
}

// specOf builds a rollout from `version=V steps="..." bg=tmpl@N host=H
// preview=P`.
func specOf(kv map[string]string) (*api.Rollout, error) {
	steps, err := parseSteps(kv["steps"])
	if err != nil {
		return nil, err
	}
	host := kv["host"]
	if host == "" {
		host = "checkout.internal"
	}
	r := &api.Rollout{Key: testKey, Version: kv["version"], Steps: steps, XDS: &api.XDSConfig{
		Host: host,
		Endpoints: map[string][]string{
			"v1": {"127.0.0.1:9001"}, "v2": {"127.0.0.1:9002"}, "v3": {"127.0.0.1:9003"},
		},
	}}
	if r.Workload, err = workloadOf(kv); err != nil {
		return nil, err
	}
	if v, ok := kv["replicas"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("replicas: %w", err)
		}
		r.Replicas = int32(n)
	}
	if preview := kv["preview"]; preview != "" {
		// A blue-green rollout: steps= is its compiled program (see
		// api/bluegreen.go), preview= its preview host.
		r.Strategy, r.XDS.PreviewHost = api.StrategyBlueGreen, preview
	}
	if bg := kv["bg"]; bg != "" {
		names, start, _ := strings.Cut(bg, "@")
		n, _ := strconv.Atoi(start)
		r.Background = &api.BackgroundAnalysis{Analysis: *analysisOf(names), StartingStep: int32(n)}
	}
	return r, nil
}

// run executes one script line and returns its output lines.
func (h *harness) run(line string) ([]string, error) {
	words, kv, err := parseArgs(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	var ev Event
	var out []string
	switch cmd := words[0]; cmd {
	case "spec":
		r, err := specOf(kv)
		if err != nil {
			return nil, err
		}
		h.specs[words[1]] = r
		return nil, nil
	case "change":
		r, ok := h.specs[words[1]]
		if !ok {
			return nil, fmt.Errorf("no spec %s", words[1])
		}
		c := Change{Commit: kv["commit"], Class: Class(kv["class"]), Rollout: r}
		if c.Commit == "" {
			c.Commit = "commit-" + words[1]
		}
		if risky := kv["risky"]; risky != "" {
			c.Risky = strings.Split(risky, ";")
		}
		if t, ok := kv["ticket"]; ok {
			n, err := strconv.ParseUint(t, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("ticket: %w", err)
			}
			c.Ticket = n
		}
		if resume, ok := kv["resume"]; ok {
			n, err := strconv.ParseInt(resume, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("resume: %w", err)
			}
			r := int32(n)
			c.ResumeStep = &r
		}
		ev = c
	case "recover":
		// recover STABLE [CANARY] source=git|cluster [step=N weight=W] [aborted=true]:
		// the daemon found STABLE serving stable traffic (and CANARY).
		ev, err = recoverEvent(h.specs, words[1:], kv)
		if err != nil {
			return nil, err
		}
	case "remove":
		ev = Change{Commit: kv["commit"], Class: ClassRemoved}
	case "invalid":
		ev = Invalid{Commit: kv["commit"], Errors: api.Diagnostics{{
			File: "rollouts/checkout.yaml", Line: 7, Field: "spec.strategy.canary.steps[0].setWeight",
			Message: kv["error"], Severity: api.SeverityError,
		}}}
	case "ack", "nack", "acktimeout":
		gen := h.state.TrafficGen
		if g, ok := kv["gen"]; ok {
			n, err := strconv.ParseUint(g, 10, 64)
			if err != nil {
				return nil, err
			}
			gen = n
		}
		switch cmd {
		case "ack":
			ev = TrafficAcked{Gen: gen}
		case "nack":
			ev = TrafficNacked{Gen: gen, Reason: kv["reason"]}
		default:
			ev = TrafficAckTimeout{Gen: gen}
		}
	case "fire":
		id := kv["id"]
		if id == "" && h.state.Timer != nil {
			id = h.state.Timer.ID
		}
		if len(words) > 1 {
			id = h.timerID(words[1])
		}
		ev = TimerFired{ID: id}
	case "pods":
		// pods HASH ready=N [replicas=N]: the actuator's report.
		ready, err := strconv.Atoi(kv["ready"])
		if err != nil {
			return nil, fmt.Errorf("ready: %w", err)
		}
		replicas := ready
		if v, ok := kv["replicas"]; ok {
			if replicas, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("replicas: %w", err)
			}
		}
		ev = PodsReady{Hash: h.experimentHash(words[1]), Replicas: int32(replicas), Ready: int32(ready)}
	case "result":
		run := kv["run"]
		switch run {
		case "", "step":
			run = h.state.StepRun
		case "background":
			run = h.state.BackgroundRun
		default:
			run = h.experimentRunName(run)
		}
		res := AnalysisResult{Run: run, Phase: AnalysisPhase(kv["phase"]), Message: kv["msg"],
			Metric: kv["metric"], Value: kv["value"], Condition: kv["cond"]}
		if kv["metric"] != "" {
			res.Metrics = []MetricStatus{{Name: kv["metric"], Phase: res.Phase, Value: kv["value"]}}
		}
		ev = res
	case "promote", "promote-full", "abort", "retry", "approve", "pause", "resume":
		c := Command{Kind: CommandKind(cmd)}
		if err := h.state.Allows(c.Kind); err != nil {
			out = append(out, "refused: "+err.Error())
		}
		ev = c
	case "slot":
		// The runner's admission grants the rollout a canary slot.
		ev = SlotGranted{}
	case "restart":
		// A restart starts from what the store kept: the state as JSON.
		b, err := json.Marshal(h.state)
		if err != nil {
			return nil, err
		}
		var s State
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		h.state = s
		ev = Restart{}
	case "status":
		b, err := json.MarshalIndent(h.state.Status(), "", "  ")
		if err != nil {
			return nil, err
		}
		return strings.Split(string(b), "\n"), nil
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	before := h.state.Seq
	h.state, h.acts = Step(h.state, ev)
	if h.state.Seq == before {
		return append(out, "(no change)"), nil
	}
	for _, a := range h.acts {
		out = append(out, formatAction(a))
	}
	return append(out, formatState(h.state)), nil
}

// timerID names the armed timer of a kind: "deadline" (the wait for
// pods) or "scaledown/HASH" (a drain's delay).
func (h *harness) timerID(kind string) string {
	if kind == "deadline" {
		if w := h.state.Wait; w != nil && w.Timer != nil {
			return w.Timer.ID
		}
		return "deadline/none"
	}
	hash := strings.TrimPrefix(kind, "scaledown/")
	for _, d := range h.state.Drains {
		if d.Hash == hash && d.Timer != nil {
			return d.Timer.ID
		}
	}
	return "scaledown/none"
}

// experimentHash reads "exp:NAME" as the hash of the running
// experiment's template NAME; any other word is a hash.
func (h *harness) experimentHash(word string) string {
	name, ok := strings.CutPrefix(word, "exp:")
	if !ok || h.state.Experiment == nil {
		return word
	}
	for _, s := range h.state.Experiment.Sets {
		if s.Template.Name == name {
			return s.Hash
		}
	}
	return word
}

// experimentRunName reads "exp:NAME" as the run of the running
// experiment's analysis NAME; any other word is a run name.
func (h *harness) experimentRunName(word string) string {
	name, ok := strings.CutPrefix(word, "exp:")
	if !ok || h.state.Experiment == nil {
		return word
	}
	for _, r := range h.state.Experiment.Runs {
		if r.Analysis == name {
			return r.Run
		}
	}
	return word
}

func formatAction(a Action) string {
	switch a := a.(type) {
	case ScaleWorkloads:
		s := fmt.Sprintf("scale-workloads gen=%d", a.Gen)
		if a.Ahead {
			s = fmt.Sprintf("scale-workloads-ahead gen=%d", a.Gen)
		}
		for _, w := range a.Sets {
			s += fmt.Sprintf(" %s=%s:%s:%d", w.Role, w.Version, w.Hash, w.Replicas)
			if w.At != nil {
				s += fmt.Sprintf("@step%d/%d%%", w.At.Step, w.At.Weight)
			}
			if w.Aborted {
				s += "!aborted"
			}
		}
		return s
	case SetTraffic:
		t := a.Traffic
		s := fmt.Sprintf("set-traffic gen=%d stable=%s:%d canary=%s:%d", a.Gen, t.StableVersion, t.Weights.Stable, t.CanaryVersion, t.Weights.Canary)
		if t.PreviewHost != "" {
			s += " preview->" + t.CanaryVersion
		}
		if t.BaselineWorkload != "" {
			s += fmt.Sprintf(" baseline=%s:%d", t.BaselineVersion, t.Weights.Baseline)
		}
		if t.StableWorkload != "" || t.CanaryWorkload != "" {
			s += fmt.Sprintf(" pods=%s/%s", t.StableWorkload, t.CanaryWorkload)
		}
		if t.BaselineWorkload != "" {
			s += "/" + t.BaselineWorkload
		}
		for _, r := range t.HeaderRoutes {
			s += " header=" + r.Name
		}
		for _, r := range t.MirrorRoutes {
			s += fmt.Sprintf(" mirror=%s:%d", r.Name, r.Percentage)
		}
		if t.SessionAffinity != nil {
			s += " sticky"
		}
		return s
	case StartAnalysis:
		keys := make([]string, 0, len(a.Args))
		for k := range a.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var args []string
		for _, k := range keys {
			args = append(args, k+"="+a.Args[k])
		}
		for _, arg := range a.Analysis.Args {
			args = append(args, "arg:"+arg.Name+"="+arg.Value)
		}
		return fmt.Sprintf("start-analysis %s kind=%s templates=%s %s", a.Run, a.Kind, a.Analysis.TemplateNames(), strings.Join(args, " "))
	case StopAnalysis:
		return "stop-analysis " + a.Run
	case StartTimer:
		return fmt.Sprintf("start-timer %s %s", a.Timer.ID, a.Timer.Duration)
	case CancelTimer:
		return "cancel-timer " + a.ID
	case Notify:
		s := fmt.Sprintf("alert %s %s %q", a.Alert.ID, a.Alert.Severity, a.Alert.Reason)
		if a.Alert.Metric != "" {
			s += fmt.Sprintf(" metric=%s value=%s cond=%q", a.Alert.Metric, a.Alert.Value, a.Alert.Condition)
		}
		return s
	}
	return fmt.Sprintf("unknown action %T", a)
}

func formatState(s State) string {
	out := fmt.Sprintf("-> %s step=%d/%d cursor=%s w=%d/%d stable=%s canary=%s",
		s.Phase, s.StepIndex, s.StepCount(), s.Cursor, s.Weights.Stable, s.Weights.Canary, s.StableVersion, s.CanaryVersion)
	if w := s.routedWeights(); w.Baseline > 0 {
		out = strings.Replace(out, fmt.Sprintf(" w=%d/%d ", s.Weights.Stable, s.Weights.Canary), fmt.Sprintf(" w=%d/%d/%d ", w.Stable, w.Canary, w.Baseline), 1)
	}
	if out = strings.Replace(out, "cursor= ", "cursor=Enter ", 1); s.Timer != nil {
		out += " timer=" + s.Timer.ID
	}
	if s.Hold != nil {
		out += " hold=" + string(s.Hold.Kind)
	}
	if s.UserPaused {
		out += " user-paused"
	}
	if s.Aborted {
		out += " aborted"
	}
	if s.Pending != nil {
		out += " pending=" + short(s.Pending.Commit)
	}
	if q := s.Queued; q != nil {
		out += fmt.Sprintf(" queued=%s@%s#%d", q.Rollout.Version, short(q.Commit), q.Ticket)
	}
	for _, r := range s.Runs {
		out += fmt.Sprintf(" run=%s:%s", r.Name, r.Phase)
	}
	for _, w := range s.Workloads {
		out += fmt.Sprintf(" %s=%s:%d/%d", w.Role, w.Hash, w.Ready, w.Desired)
	}
	if w := s.Wait; w != nil && w.Timer != nil {
		out += " deadline=" + w.Timer.ID
	}
	if x := s.Experiment; x != nil {
		out += fmt.Sprintf(" experiment=step%d", x.Step)
		if x.Available {
			out += ",available"
		}
		if x.Elapsed {
			out += ",elapsed"
		}
	}
	for _, d := range s.Drains {
		if d.Timer != nil {
			out += " scaledown=" + d.Timer.ID
		}
	}
	return out + fmt.Sprintf(" msg=%q", s.Message)
}

// checkInvariants are the properties every state must have.
func checkInvariants(s State) error {
	if rw := s.routedWeights(); rw.Baseline < 0 || rw.Stable < 0 || rw.Stable+rw.Canary+rw.Baseline != 100 || rw.Baseline > rw.Canary {
		if s.Spec != nil {
			return fmt.Errorf("bad routed weights %+v", rw)
		}
	}
	w := s.Weights
	if w.Stable < 0 || w.Stable > 100 || w.Canary < 0 || w.Canary > 100 || w.Stable+w.Canary != 100 {
		if s.Spec != nil {
			return fmt.Errorf("bad weights %+v", w)
		}
	}
	// An abort in Kubernetes mode may wait for stable pods before its
	// traffic moves back.
	abortWaits := s.Wait != nil && s.Wait.Kind == WaitAbort
	if s.Aborted && !abortWaits && (w.Canary != 0 || len(s.HeaderRoutes) > 0 || len(s.MirrorRoutes) > 0) {
		return fmt.Errorf("aborted with canary traffic: %+v %v %v", w, s.HeaderRoutes, s.MirrorRoutes)
	}
	if s.Phase == PhaseHealthy && (s.CanaryVersion != "" || w.Canary != 0 || len(s.HeaderRoutes) > 0) {
		return fmt.Errorf("healthy with a canary: %q %+v", s.CanaryVersion, w)
	}
	if s.Spec != nil && (s.StepIndex < 0 || s.StepIndex > s.StepCount()) {
		return fmt.Errorf("step index %d out of 0..%d", s.StepIndex, s.StepCount())
	}
	active := 0
	for _, r := range s.Runs {
		if !r.Phase.Terminal() {
			active++
		}
	}
	if active > 2+len(s.experimentRunNames()) {
		return fmt.Errorf("%d unfinished runs", active)
	}
	if x := s.Experiment; x != nil {
		st, ok := (&machine{s: s}).currentStep()
		if !s.CanaryActive() || !ok || st.Experiment == nil || x.Step != s.StepIndex {
			return fmt.Errorf("experiment of step %d runs at step %d (active %v)", x.Step, s.StepIndex, s.CanaryActive())
		}
	}
	if fin := len(s.Runs) - active; fin > maxFinishedRuns {
		return fmt.Errorf("%d finished runs kept", fin)
	}
	return nil
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		in    string
		words []string
		kv    map[string]string
	}{
		{"change a commit=c1", []string{"change", "a"}, map[string]string{"commit": "c1"}},
		{`spec s steps="setWeight 20; pause"`, []string{"spec", "s"}, map[string]string{"steps": "setWeight 20; pause"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			w, kv, err := parseArgs(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(w) != fmt.Sprint(tt.words) || fmt.Sprint(kv) != fmt.Sprint(tt.kv) {
				t.Errorf("got %v %v, want %v %v", w, kv, tt.words, tt.kv)
			}
		})
	}
}

// recoverEvent builds the Recovered of a "recover" line.
func recoverEvent(specs map[string]*api.Rollout, names []string, kv map[string]string) (Recovered, error) {
	e := Recovered{Commit: kv["commit"], Source: RecoverySource(kv["source"]), Step: -1, Found: kv["found"]}
	if e.Commit == "" {
		e.Commit = "commit-recovered"
	}
	var ok bool
	if len(names) == 0 {
		return e, fmt.Errorf("recover needs a stable spec")
	}
	if e.Stable, ok = specs[names[0]]; !ok {
		return e, fmt.Errorf("no spec %s", names[0])
	}
	if len(names) > 1 {
		if e.Canary, ok = specs[names[1]]; !ok {
			return e, fmt.Errorf("no spec %s", names[1])
		}
	}
	if v, set := kv["draining"]; set {
		// draining=SPEC:REPLICAS[,SPEC:REPLICAS]: sets found draining.
		for _, d := range strings.Split(v, ",") {
			name, n, _ := strings.Cut(d, ":")
			spec, ok := specs[name]
			replicas, err := strconv.ParseInt(n, 10, 32)
			if !ok || err != nil || spec.Workload == nil {
				return e, fmt.Errorf("draining %q: want a Kubernetes spec name and replicas", d)
			}
			e.Draining = append(e.Draining, Drain{Version: spec.Version, Hash: spec.Workload.PodTemplateHash, Replicas: int32(replicas), Spec: spec})
		}
	}
	e.Aborted = kv["aborted"] == "true"
	for key, dst := range map[string]*int32{"step": &e.Step, "weight": &e.Weight} {
		if v, set := kv[key]; set {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return e, fmt.Errorf("%s: %w", key, err)
			}
			*dst = int32(n)
		}
	}
	return e, nil
}
