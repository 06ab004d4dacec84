package rollout

import (
	"time"

	"github.com/sluice-dev/sluice/api"
)

// Phase is the phase of a rollout (DESIGN §5).
type Phase string

// Rollout phases.
const (
	PhaseProgressing Phase = "Progressing"
	PhasePaused      Phase = "Paused"
	PhaseHealthy     Phase = "Healthy"
	PhaseDegraded    Phase = "Degraded"
)

// Cursor says how far the current step has got. A step is entered (its
// traffic effect applied and pushed), waits for the xDS ACK of that traffic,
// then runs its window (a pause timer or an analysis run) and is done.
// Only a done step lets the rollout move on, so weights never move forward
// except through a completed step.
type Cursor string

// Step cursors, in the order a step goes through them.
const (
	CursorEnter     Cursor = ""          // not entered yet
	CursorAwaitPods Cursor = "AwaitPods" // Kubernetes mode: waiting for Ready pods before the step's traffic moves (State.Wait)
	CursorAwaitAck  Cursor = "AwaitAck"  // traffic pushed, waiting for the ACK
	CursorReady     Cursor = "Ready"     // traffic ACKed (or timed out), window not started
	CursorRunning   Cursor = "Running"   // pause timer or analysis run in progress
	CursorDone      Cursor = "Done"      // completed; the next step starts unless held
)

// HoldKind says why a canary is held at its current step.
type HoldKind string

// Hold kinds. A user pause and a pending approval are kept apart (State.
// UserPaused, State.Pending) because they are released by other commands.
const (
	HoldInconclusive HoldKind = "Inconclusive" // an analysis run ended Inconclusive
	HoldNack         HoldKind = "NACK"         // xDS clients rejected the step's traffic
	// HoldProgressDeadline: the canary's pods did not become Ready within
	// Workload.ProgressDeadline and ProgressDeadlineAbort is off.
	HoldProgressDeadline HoldKind = "ProgressDeadline"
	// HoldCluster: the cluster of a multi-cluster rollout's part cannot be
	// reached (waves.go); released when it can again.
	HoldCluster HoldKind = "ClusterUnreachable"
)

// Hold stops the canary at its current step until promote, retry or resume.
type Hold struct {
	Kind   HoldKind `json:"kind"`
	Reason string   `json:"reason"`
	// Run is the analysis run that ended Inconclusive, for HoldInconclusive.
	Run string `json:"run,omitempty"`
}

// Pending is a risky change waiting for `sluice approve`; the spec in force
// keeps running (held) meanwhile.
type Pending struct {
	Commit  string       `json:"commit"`
	Class   Class        `json:"class"`
	Rollout *api.Rollout `json:"rollout"`
	Reasons []string     `json:"reasons"`
	// ResumeStep is the change's ResumeStep, kept for when it is approved.
	ResumeStep *int32 `json:"resumeStep,omitempty"`
	// Ticket is the change's place in the canary queue (queue.go), kept
	// so that an approved new canary queues where its commit put it.
	Ticket uint64 `json:"ticket,omitempty"`
}

// Timer describes the one armed timer of a rollout, so a restarted runner
// can arm it again. A re-armed timer runs its whole duration again: a
// restart may lengthen a pause, never shorten it.
type Timer struct {
	ID       string        `json:"id"`
	Duration time.Duration `json:"duration"`
}

// RunKind says what an analysis run belongs to.
type RunKind string

// Run kinds.
const (
	RunStep       RunKind = "step"
	RunBackground RunKind = "background"
)

// AnalysisPhase is the phase of an analysis run or metric (DESIGN §5).
type AnalysisPhase string

// Analysis phases.
const (
	AnalysisPending      AnalysisPhase = "Pending"
	AnalysisRunning      AnalysisPhase = "Running"
	AnalysisSuccessful   AnalysisPhase = "Successful"
	AnalysisFailed       AnalysisPhase = "Failed"
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
	AnalysisError        AnalysisPhase = "Error"
)

// Terminal reports whether the phase is final.
func (p AnalysisPhase) Terminal() bool {
	switch p {
	case AnalysisSuccessful, AnalysisFailed, AnalysisInconclusive, AnalysisError:
		return true
	}
	return false
}

// MetricStatus is the latest measurement of one metric of a run.
type MetricStatus struct {
	Name    string        `json:"name"`
	Phase   AnalysisPhase `json:"phase"`
	Value   string        `json:"value"`
	Message string        `json:"message"`
	// SuccessCondition and FailureCondition are the metric's conditions
	// as written, for people and plots.
	SuccessCondition string `json:"successCondition,omitempty"`
	FailureCondition string `json:"failureCondition,omitempty"`
	// Measurements are the metric's latest measurements, oldest first,
	// at most its measurementRetention (10 unless set).
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Measurement is one measurement of a metric, as plotted. Time is when it
// finished (RFC 3339), kept as text: the machine has no clock and never
// reads it.
type Measurement struct {
	Time  string        `json:"time"`
	Phase AnalysisPhase `json:"phase"`
	Value string        `json:"value"`
}

// Run is one analysis run of the current canary. Args and Analysis are
// kept so that a restarted runner can start a run that had not finished.
type Run struct {
	Name     string            `json:"name"`
	Kind     RunKind           `json:"kind"`
	Step     int32             `json:"step"`
	Phase    AnalysisPhase     `json:"phase"`
	Message  string            `json:"message,omitempty"`
	Metrics  []MetricStatus    `json:"metrics,omitempty"`
	Analysis api.Analysis      `json:"analysis"`
	Args     map[string]string `json:"args,omitempty"`
}

// maxFinishedRuns bounds the finished runs kept per canary (DESIGN §5).
const maxFinishedRuns = 10

// State is everything the machine knows about one rollout. It is plain
// data: the runner stores it as JSON and hands it back to Step.
type State struct {
	Key api.Key `json:"key"`
	// Spec is the rollout in force: the last valid change applied.
	Spec    *api.Rollout `json:"spec,omitempty"`
	Commit  string       `json:"commit,omitempty"`
	Phase   Phase        `json:"phase,omitempty"`
	Message string       `json:"message,omitempty"`

	StableVersion string `json:"stableVersion,omitempty"`
	// StableHash and CanaryHash are the pod-template hashes of the two
	// versions in Kubernetes mode ("" in standalone mode). A version is the
	// pair (image, hash): the same image with another hash is a new canary.
	StableHash string `json:"stableHash,omitempty"`
	CanaryHash string `json:"canaryHash,omitempty"`
	// StableSpec is the rollout the stable version came from: its template
	// builds the stable ReplicaSet, also after a restart mid-canary.
	StableSpec *api.Rollout `json:"stableSpec,omitempty"`
	// BaselineHash is the pod-template hash of the baseline the current
	// canary runs beside (Kubernetes mode, a rollout whose analysis uses
	// the judge; see baseline.go), fixed when the canary starts; "" none.
	BaselineHash string `json:"baselineHash,omitempty"`
	// CanaryVersion is "" when no canary is in flight; after an abort it
	// keeps the aborted version.
	CanaryVersion string `json:"canaryVersion,omitempty"`
	StepIndex     int32  `json:"stepIndex"`
	Cursor        Cursor `json:"cursor,omitempty"`
	// AckTimedOut records that a step went on without the ACK of its
	// traffic; it stays set (and shown) until a later ACK arrives.
	AckTimedOut bool `json:"ackTimedOut,omitempty"`
	// Unverified is why the latest ACKed traffic is unverified (a router
	// that cannot tell whether its proxies took it); "" when verified.
	Unverified string `json:"unverified,omitempty"`

	Weights      api.Weights       `json:"weights"`
	HeaderRoutes []api.HeaderRoute `json:"headerRoutes,omitempty"`
	MirrorRoutes []api.MirrorRoute `json:"mirrorRoutes,omitempty"`

	// Runs are the analysis runs of the current canary: every unfinished
	// one and at most the last 10 finished ones.
	Runs []Run `json:"runs,omitempty"`
	// RunSeq numbers runs so that names never repeat within a rollout.
	RunSeq int `json:"runSeq,omitempty"`
	// StepRun and BackgroundRun name the current step's run and the
	// background run; a finished run stays named so it is never re-run.
	StepRun       string `json:"stepRun,omitempty"`
	BackgroundRun string `json:"backgroundRun,omitempty"`

	Aborted     bool   `json:"aborted,omitempty"`
	AbortReason string `json:"abortReason,omitempty"`
	// Attempt counts retries of the current canary.
	Attempt int `json:"attempt,omitempty"`

	UserPaused bool     `json:"userPaused,omitempty"`
	Hold       *Hold    `json:"hold,omitempty"`
	Pending    *Pending `json:"pending,omitempty"`
	// Queued is a new canary waiting for a canary slot (queue.go); the
	// spec in force keeps running meanwhile.
	Queued *Queued `json:"queued,omitempty"`
	// WaveWait is a new canary of a multi-cluster rollout's part waiting
	// for its wave (waves.go); the stable keeps all traffic meanwhile.
	// WaveCancelled is why a waiting canary was dropped (a wave failed).
	WaveWait      *Queued     `json:"waveWait,omitempty"`
	WaveCancelled *WaveCancel `json:"waveCancelled,omitempty"`
	// WaveHeld: the part's steps are done and it holds at 100 % for later
	// waves; WaveReleased: every wave has passed and it promotes.
	WaveHeld     bool `json:"waveHeld,omitempty"`
	WaveReleased bool `json:"waveReleased,omitempty"`

	// Errors are the load errors of the latest commit that touched this
	// rollout; the previous good Spec keeps running.
	Errors      []api.Diagnostic `json:"errors,omitempty"`
	ErrorCommit string           `json:"errorCommit,omitempty"`

	// Removed is set when the rollout's file was deleted: sluice no longer
	// manages it and its last traffic stays as it was.
	Removed bool `json:"removed,omitempty"`

	// Seq increases by one with every change of the state.
	Seq uint64 `json:"seq"`
	// TrafficGen numbers SetTraffic actions; AwaitGen is the generation
	// whose ACK the current step waits for.
	TrafficGen uint64 `json:"trafficGen,omitempty"`
	AwaitGen   uint64 `json:"awaitGen,omitempty"`
	AckedGen   uint64 `json:"ackedGen,omitempty"`

	Timer *Timer `json:"timer,omitempty"`
	// Settle is a promotion, abort or other move of all traffic that
	// completes only on its ACK.
	Settle *Settle `json:"settle,omitempty"`

	// Kubernetes mode only (Spec.Workload set); see replicas.go, share.go,
	// pods.go, podwait.go and drain.go.

	// Wait is the wait for Ready pods that holds traffic back.
	Wait *PodWait `json:"wait,omitempty"`
	// Drains are versions that lost their traffic and keep their pods
	// until their scale-down delay has passed.
	Drains []Drain `json:"drains,omitempty"`
	// Shares is the largest share of traffic each pod-template hash may be
	// getting: that of the last ACKed generation or of any pushed since.
	Shares []Share `json:"shares,omitempty"`
	// Pods is the latest PodsReady per pod-template hash.
	Pods []PodsReady `json:"pods,omitempty"`
	// Workloads are the sets of the last ScaleWorkloads, with their Ready
	// pods, for status; WorkloadGen numbers ScaleWorkloads actions.
	Workloads   []WorkloadStatus `json:"workloads,omitempty"`
	WorkloadGen uint64           `json:"workloadGen,omitempty"`
	// Marked is the canary position the last ScaleWorkloads wrote on the
	// canary's ReplicaSet: a new position is written as soon as it is
	// reached (WorkloadSet.At).
	Marked *Position `json:"marked,omitempty"`
	// MarkedAborted is the hash of the set the last ScaleWorkloads marked
	// aborted ("" for none): a new mark goes ahead of the traffic.
	MarkedAborted string `json:"markedAborted,omitempty"`
	// Experiment is the current step's experiment while it runs
	// (experiment.go); its sets are part of the desired sets.
	Experiment *ExperimentRun `json:"experiment,omitempty"`
}

// Steps are the steps of the spec in force.
func (s State) Steps() []api.Step {
	if s.Spec == nil {
		return nil
	}
	return s.Spec.Steps
}

// StepCount is the number of steps of the spec in force.
func (s State) StepCount() int32 { return int32(len(s.Steps())) }

// CanaryActive reports whether a canary is in flight and not aborted.
func (s State) CanaryActive() bool {
	return s.CanaryVersion != "" && !s.Aborted && !s.Removed
}

// run returns the run with the given name, or nil.
func (s *State) run(name string) *Run {
	if name == "" {
		return nil
	}
	for i := range s.Runs {
		if s.Runs[i].Name == name {
			return &s.Runs[i]
		}
	}
	return nil
}

// clone copies s deeply enough that Step can change the copy without
// touching s: slices are copied, pointed-to values are only ever replaced.
func (s State) clone() State {
	c := s
	c.HeaderRoutes = cloneSlice(s.HeaderRoutes)
	c.MirrorRoutes = cloneSlice(s.MirrorRoutes)
	c.Errors = cloneSlice(s.Errors)
	c.Runs = cloneSlice(s.Runs)
	c.Drains = cloneSlice(s.Drains)
	c.Shares = cloneSlice(s.Shares)
	c.Pods = cloneSlice(s.Pods)
	c.Workloads = cloneSlice(s.Workloads)
	c.Experiment = s.Experiment.clone()
	return c
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
