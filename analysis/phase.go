package analysis

import "time"

// Phase is the phase of a run, a metric or a measurement (DESIGN §5).
type Phase string

// Phases, spelled as in Argo Rollouts and DESIGN §5.
const (
	PhasePending      Phase = "Pending"
	PhaseRunning      Phase = "Running"
	PhaseSuccessful   Phase = "Successful"
	PhaseFailed       Phase = "Failed"
	PhaseInconclusive Phase = "Inconclusive"
	PhaseError        Phase = "Error"
)

// Completed reports whether p is final.
func (p Phase) Completed() bool {
	switch p {
	case PhaseSuccessful, PhaseFailed, PhaseInconclusive, PhaseError:
		return true
	}
	return false
}

// phaseOrder ranks phases from best to worst, as Argo's analysisStatusOrder:
// the run takes the worst phase of its metrics.
var phaseOrder = map[Phase]int{
	PhaseSuccessful:   0,
	PhaseRunning:      1,
	PhasePending:      2,
	PhaseInconclusive: 3,
	PhaseError:        4,
	PhaseFailed:       5,
}

// worse reports whether b is worse than a.
func worse(a, b Phase) bool { return phaseOrder[b] > phaseOrder[a] }

// Measurement is one observation of a metric.
type Measurement struct {
	Phase Phase `json:"phase"`
	// Value is the measured value as text ("0.998", "[0.1,0.2]"); empty
	// when the provider returned nothing.
	Value string `json:"value,omitempty"`
	// Message says why the measurement has its phase, e.g. "0.912 < 0.99",
	// "no data", or the provider's error.
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// MetricStatus is the state of one metric of a run.
type MetricStatus struct {
	Name    string `json:"name"`
	Phase   Phase  `json:"phase"`
	Value   string `json:"value"` // latest measurement's value
	Message string `json:"message"`
	// Measurements are the latest measurements, at most the metric's
	// measurementRetention (10 when not set), oldest first.
	Measurements []Measurement `json:"measurements,omitempty"`
	DryRun       bool          `json:"dryRun,omitempty"`
	Tally        Tally         `json:"tally"`
}

// Tally counts a metric's measurements by phase. It is kept apart from
// Measurements because retention trims the list but never the counts.
type Tally struct {
	Count              int `json:"count"`
	Successful         int `json:"successful"`
	Failed             int `json:"failed"`
	Inconclusive       int `json:"inconclusive"`
	Error              int `json:"error"`
	ConsecutiveError   int `json:"consecutiveError"`
	ConsecutiveSuccess int `json:"consecutiveSuccess"`
}

// Add counts one completed measurement. Errors do not count towards
// Count, as in Argo: a metric with count 5 takes 5 real measurements.
func (t *Tally) Add(p Phase) {
	if p == PhaseError {
		t.Error++
		t.ConsecutiveError++
		t.ConsecutiveSuccess = 0
		return
	}
	t.Count++
	t.ConsecutiveError = 0
	switch p {
	case PhaseSuccessful:
		t.Successful++
		t.ConsecutiveSuccess++
	case PhaseFailed:
		t.Failed++
		t.ConsecutiveSuccess = 0
	case PhaseInconclusive:
		t.Inconclusive++
		t.ConsecutiveSuccess = 0
	}
}

// Record adds one completed measurement of m: it counts it, keeps it
// within m.Retention, and re-assesses the metric. It is the synchronous
// core of a run, usable on its own: feed measurements, read Phase and
// Message.
func (s *MetricStatus) Record(m *Metric, meas Measurement) {
	if s.Name == "" {
		s.Name, s.DryRun = m.Name, m.DryRun
	}
	s.Tally.Add(meas.Phase)
	s.Measurements = append(s.Measurements, meas)
	if n := len(s.Measurements) - m.Retention; m.Retention > 0 && n > 0 {
		s.Measurements = append([]Measurement(nil), s.Measurements[n:]...)
	}
	if meas.Value != "" {
		s.Value = meas.Value
	}
	s.Phase, s.Message = Assess(m, s.Tally, s.Measurements, false)
	if !s.Phase.Completed() {
		s.Message = meas.Message
	}
}

// RunStatus is the state of one analysis run.
type RunStatus struct {
	Name  string `json:"name"`
	Phase Phase  `json:"phase"`
	// Reason is one line naming the deciding metric, its value and the
	// condition, e.g. "success-rate: 0.912 < 0.99 (failureLimit 0)".
	Reason  string         `json:"reason"`
	Metrics []MetricStatus `json:"metrics"`
	// Score is the judge score of the run (0..100) when it has judge
	// metrics, nil otherwise.
	Score *float64 `json:"score,omitempty"`
}
