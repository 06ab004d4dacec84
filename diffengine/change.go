package diffengine

import (
	"bytes"
	"encoding/json"

	"github.com/sluice-dev/sluice/api"
)

// Class says what a rollout change means for the controller. When a change
// has several aspects the strongest class wins, in the order NewVersion,
// StrategyEdit, EndpointsOnly, Cosmetic: a StrategyEdit that also changes
// endpoints is a StrategyEdit, and the controller adopts the whole new spec.
type Class string

// Classes of rollout changes.
const (
	// NewVersion: the version (image of the first container) changed; start
	// a canary from the first step.
	NewVersion Class = "NewVersion"
	// StrategyEdit: anything else in the spec changed (steps, analysis,
	// traffic routing, replicas, referenced analysis templates, pod template
	// fields other than the version); adopt the new spec and continue from
	// the current step (see Change.ResumeStep).
	StrategyEdit Class = "StrategyEdit"
	// EndpointsOnly: only the sluice.io/xds endpoints changed; update EDS.
	EndpointsOnly Class = "EndpointsOnly"
	// Cosmetic: only metadata labels or annotations changed; nothing to do.
	Cosmetic Class = "Cosmetic"
	// Removed: the rollout is gone from the new files.
	Removed Class = "Removed"
	// Added: the rollout is new.
	Added Class = "Added"
	// Unchanged: no semantic difference (comments, key order, formatting and
	// explicit defaults do not count).
	Unchanged Class = "Unchanged"
)

// Kinds of field changes.
const (
	KindAdded    = "added"
	KindRemoved  = "removed"
	KindModified = "modified"
	// KindMoved is an element that kept its value but changed position in an
	// ordered list (steps, managedRoutes, containers). Old and New hold the
	// old and new 0-based positions.
	KindMoved = "moved"
)

// FieldChange is one difference between two versions.
//
// Path is an Argo field path. List indices are positions in the new list,
// except for removed elements, which use their old position. Elements of
// named lists are written by name (containers[app].image,
// spec.metrics[error-rate].failureLimit); map keys that are not plain
// identifiers are quoted (plugins["sluice.io/xds"]).
//
// Old and New are the values as plain JSON data (string, float64, bool,
// []any, map[string]any); Old is nil for added fields and New for removed
// ones. Durations are normalised to Go duration strings ("30s").
type FieldChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Old  any    `json:"old,omitempty"`
	New  any    `json:"new,omitempty"`
}

// Live is a rollout's live position, which some risk rules depend on.
// The zero value means no canary in flight.
type Live struct {
	// InFlight is true while a canary runs (phases Progressing or Paused
	// with a canary version).
	InFlight bool
	// StepIndex is the 0-based index, in the OLD steps, of the step being
	// executed (Argo's currentStepIndex).
	StepIndex int
	// CanaryWeight is the canary's current traffic weight in percent.
	CanaryWeight int32
}

// Change is the diff of one rollout between two versions.
type Change struct {
	Rollout api.Key
	Class   Class
	// Risky is set when the change must wait for `sluice approve` while a
	// canary is in flight; Reasons says why, one plain sentence each.
	Risky   bool
	Reasons []string
	Changes []FieldChange
	// ResumeStep is where a StrategyEdit continues: the index in the new
	// steps that corresponds to Live.StepIndex in the old ones (steps that
	// were kept or edited in place keep their identity; a removed current
	// step resumes at whatever replaced it). 0 unless Live.InFlight, and 0
	// for NewVersion, whose canary starts again from the first step.
	ResumeStep int
	// Old and New are the two versions (nil for Added and Removed).
	Old, New *api.Rollout
}

// changeJSON is the `sluice diff -o json` shape of a Change.
type changeJSON struct {
	Kind       string        `json:"kind"`
	Rollout    string        `json:"rollout"`
	Class      Class         `json:"class"`
	Risky      bool          `json:"risky"`
	Reasons    []string      `json:"reasons"`
	Changes    []FieldChange `json:"changes"`
	OldVersion string        `json:"oldVersion,omitempty"`
	NewVersion string        `json:"newVersion,omitempty"`
}

// MarshalJSON writes {kind, rollout, class, risky, reasons, changes}, with
// the rollout as "namespace/name" and empty lists as [].
func (c Change) MarshalJSON() ([]byte, error) {
	out := changeJSON{
		Kind:    "Rollout",
		Rollout: c.Rollout.String(),
		Class:   c.Class,
		Risky:   c.Risky,
		Reasons: c.Reasons,
		Changes: c.Changes,
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	if out.Changes == nil {
		out.Changes = []FieldChange{}
	}
	if c.Old != nil && c.New != nil && c.Old.Version != c.New.Version {
		out.OldVersion, out.NewVersion = c.Old.Version, c.New.Version
	}
	return marshalPlain(out)
}

// marshalPlain is json.Marshal without HTML escaping: conditions such as
// "result >= 0.99" stay readable in `sluice diff -o json`.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
