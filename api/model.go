package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultNamespace is the namespace of objects that do not set one.
const DefaultNamespace = "default"

// XDSPluginName is the trafficRouting plugin key that sluice implements.
const XDSPluginName = "sluice.io/xds"

// JudgePluginName is the metric provider plugin key of sluice's statistical judge.
const JudgePluginName = "sluice.io/judge"

// DefaultMaxUnapprovedWeightJump is how many points a live canary weight may
// rise in one strategy edit before the change needs approval.
const DefaultMaxUnapprovedWeightJump = 25

// Built-in analysis argument names that sluice fills when a step does not.
const (
	ArgCanary    = "canary"    // the canary version
	ArgStable    = "stable"    // the stable version
	ArgRollout   = "rollout"   // the rollout name
	ArgNamespace = "namespace" // the rollout namespace
	// ArgCluster is the name of the cluster the run judges: a
	// multi-cluster rollout's part's, else the home cluster's.
	ArgCluster = "cluster"
	// Kubernetes mode only: the pod-template hashes (the pods' label
	// rollouts-pod-template-hash) of the stable and canary versions and,
	// while one runs, of the baseline (Workload.Baseline).
	ArgStableHash   = "stable-hash"
	ArgCanaryHash   = "canary-hash"
	ArgBaselineHash = "baseline-hash"
)

// BuiltinArgs lists the argument names sluice supplies itself.
var BuiltinArgs = []string{ArgCanary, ArgStable, ArgRollout, ArgNamespace, ArgCluster, ArgStableHash, ArgCanaryHash, ArgBaselineHash}

// Key identifies a rollout or template: namespace/name.
type Key struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// ParseKey reads "ns/name" or "name" (namespace default).
func ParseKey(s string) Key {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return Key{Namespace: s[:i], Name: s[i+1:]}
		}
	}
	return Key{Namespace: DefaultNamespace, Name: s}
}

// Rollout is one validated canary rollout.
type Rollout struct {
	Key
	// File is the strategy file, relative to the loaded root; Line is the
	// line of metadata.name.
	File string `json:"file"`
	Line int    `json:"line"`
	// Version is the image of the first container, or
	// "workloadRef:<kind>/<name>" for a workloadRef rollout.
	Version  string            `json:"version"`
	Replicas int32             `json:"replicas"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Strategy is StrategyBlueGreen or empty (a canary). A blue-green
	// rollout's Steps are its step program (bluegreen.go): the same
	// machine runs both.
	Strategy Strategy `json:"strategy,omitempty"`
	// Steps are the canary steps in order; empty means promote at once.
	Steps []Step `json:"steps"`
	// Background is the optional analysis that runs for the whole canary.
	Background *BackgroundAnalysis `json:"background,omitempty"`
	// ManagedRoutes are trafficRouting.managedRoutes names, in precedence order.
	ManagedRoutes []string `json:"managedRoutes,omitempty"`
	// XDS is the sluice.io/xds plugin configuration; nil when the rollout
	// does not use sluice's traffic router.
	XDS *XDSConfig `json:"xds,omitempty"`
	// Routing names the cluster's own routers (Gateway API, Istio) the
	// rollout drives in Kubernetes mode; nil when it names none.
	Routing *ClusterRouting `json:"routing,omitempty"`
	// Placement is where the rollout runs beyond the home cluster (the
	// sluice.io/clusters annotations); nil for the home cluster only.
	Placement *Placement `json:"placement,omitempty"`
	// Wave is set on a multi-cluster rollout's part in one cluster (the
	// daemon expands the rollout into one part per cluster); nil on the
	// rollout itself.
	Wave *WaveSeat `json:"wave,omitempty"`
	// Workload is set in Kubernetes mode only: what sluice needs to run
	// the rollout's pods.
	Workload *Workload `json:"workload,omitempty"`
	// Spec is the whole Argo spec, kept for what sluice does not model yet
	// (pod template details, canaryService, antiAffinity, ...). It is part
	// of the JSON so that a persisted rollout diffs exactly like a loaded one.
	Spec v1alpha1.RolloutSpec `json:"argoSpec"`
}

// MaxUnapprovedWeightJump is the configured threshold or the default.
func (r *Rollout) MaxUnapprovedWeightJump() int32 {
	if r.XDS != nil && r.XDS.MaxUnapprovedWeightJump > 0 {
		return r.XDS.MaxUnapprovedWeightJump
	}
	return DefaultMaxUnapprovedWeightJump
}

// Strategy names how a rollout moves traffic to a new version.
type Strategy string

// StrategyBlueGreen marks a blue-green rollout. A canary's Strategy is
// empty, so that rollouts persisted before blue-green diff unchanged.
const StrategyBlueGreen Strategy = "blueGreen"

// IsBlueGreen reports whether the rollout is blue-green.
func (r *Rollout) IsBlueGreen() bool { return r.Strategy == StrategyBlueGreen }

// StepKind names a canary step type.
type StepKind string

// Step kinds sluice executes.
const (
	StepSetWeight      StepKind = "setWeight"
	StepPause          StepKind = "pause"
	StepAnalysis       StepKind = "analysis"
	StepSetHeaderRoute StepKind = "setHeaderRoute"
	StepSetMirrorRoute StepKind = "setMirrorRoute"
	StepSetCanaryScale StepKind = "setCanaryScale"
	// StepExperiment runs extra ReplicaSets and their analyses
	// (Kubernetes mode only; see Experiment).
	StepExperiment StepKind = "experiment"
)

// Step is one canary step. Argo Rollouts allows at most one of setWeight,
// pause, experiment and analysis in a step, and any of setHeaderRoute,
// setMirrorRoute and setCanaryScale beside it. Kind is the step's main
// type: setWeight, pause or analysis when the step has one, otherwise the
// first of setHeaderRoute, setMirrorRoute and setCanaryScale that is set.
// HeaderRoute, MirrorRoute and CanaryScale may be set with any Kind.
//
// Order within a step: entering it applies its weight, header route and
// mirror route together, as one traffic change with one ACK; then its
// pause or analysis runs; the step is done when that window is (at once
// when it has none). setCanaryScale changes no traffic.
type Step struct {
	Kind        StepKind     `json:"kind"`
	Weight      int32        `json:"setWeight,omitempty"`
	Pause       *Pause       `json:"pause,omitempty"`
	Analysis    *Analysis    `json:"analysis,omitempty"`
	HeaderRoute *HeaderRoute `json:"setHeaderRoute,omitempty"`
	MirrorRoute *MirrorRoute `json:"setMirrorRoute,omitempty"`
	CanaryScale *CanaryScale `json:"setCanaryScale,omitempty"`
	Experiment  *Experiment  `json:"experiment,omitempty"`
	// Phase names the part of a blue-green program the step is (preview,
	// prePromotionAnalysis, ...); empty for a canary's own steps.
	Phase string `json:"phase,omitempty"`
}

// String is a short human description, e.g. "setWeight 10" or "pause 30s";
// a step with several types lists them in the order they take effect:
// "setWeight 10, header route testers".
func (s Step) String() string {
	var parts []string
	switch s.Kind {
	case StepSetWeight:
		parts = append(parts, fmt.Sprintf("setWeight %d", s.Weight))
	case StepPause:
		if s.Pause.Indefinite() {
			parts = append(parts, "pause (until promoted)")
		} else {
			parts = append(parts, "pause "+s.Pause.Duration.String())
		}
	case StepAnalysis:
		if s.Analysis != nil {
			parts = append(parts, "analysis "+s.Analysis.TemplateNames())
		}
	case StepExperiment:
		if s.Experiment != nil {
			parts = append(parts, s.Experiment.String())
		}
	}
	if s.HeaderRoute != nil {
		parts = append(parts, s.HeaderRoute.String())
	}
	if s.MirrorRoute != nil {
		parts = append(parts, s.MirrorRoute.String())
	}
	if s.CanaryScale != nil {
		parts = append(parts, "setCanaryScale")
	}
	if len(parts) == 0 {
		parts = append(parts, string(s.Kind))
	}
	if s.Phase != "" {
		return s.Phase + ": " + strings.Join(parts, ", ")
	}
	return strings.Join(parts, ", ")
}

// Pause waits for Duration, or until promoted when Duration is zero.
type Pause struct {
	Duration time.Duration `json:"duration,omitempty"`
}

// Indefinite reports whether the pause waits for `sluice promote`.
func (p *Pause) Indefinite() bool { return p == nil || p.Duration == 0 }

// Experiment is an experiment step (Kubernetes mode): it runs Templates as
// ReplicaSets of their own beside the canary, and Analyses against them.
// The step is done when every analysis RequiredForCompletion has
// succeeded, or, with none required, once Duration has passed since all
// the templates' pods were Ready (Argo Rollouts' experiment lifecycle);
// without either it runs until promoted. An analysis that fails or errors
// aborts the rollout. The ReplicaSets go away when the step ends.
type Experiment struct {
	Duration  time.Duration        `json:"duration,omitempty"`
	Templates []ExperimentTemplate `json:"templates"`
	Analyses  []ExperimentAnalysis `json:"analyses,omitempty"`
	DryRun    []string             `json:"dryRun,omitempty"`
}

// ExperimentTemplate is one ReplicaSet of an experiment: the pod template
// of the stable or the canary version (SpecRef) with Labels and
// Annotations added, under a pod-template hash of its own.
type ExperimentTemplate struct {
	Name    string  `json:"name"`
	SpecRef SpecRef `json:"specRef"`
	// Replicas is the number of pods (Argo's default: 1).
	Replicas    int32             `json:"replicas"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Selector replaces the rollout's selector (Argo's template selector),
	// with Labels added to it as Argo does; nil keeps the rollout's.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Weight is accepted but not routed: sluice's routers have no
	// experiment side yet (see docs/argo-compatibility.md).
	Weight *int32 `json:"weight,omitempty"`
}

// SpecRef names the version whose pod template an experiment template runs.
type SpecRef string

// Spec refs, as Argo Rollouts names them.
const (
	SpecRefStable SpecRef = "stable"
	SpecRefCanary SpecRef = "canary"
)

// ExperimentAnalysis is one analysis of an experiment, named so that its
// result can be told from the others'.
type ExperimentAnalysis struct {
	Name                  string   `json:"name"`
	Analysis              Analysis `json:"analysis"`
	RequiredForCompletion bool     `json:"requiredForCompletion,omitempty"`
}

// Analysis is an analysis step, or the shape of background analysis.
type Analysis struct {
	Templates            []TemplateRef  `json:"templates"`
	Args                 []Arg          `json:"args,omitempty"`
	DryRun               []string       `json:"dryRun,omitempty"`
	MeasurementRetention map[string]int `json:"measurementRetention,omitempty"`
}

// TemplateNames joins the referenced template names with "+".
func (a *Analysis) TemplateNames() string {
	s := ""
	for i, t := range a.Templates {
		if i > 0 {
			s += "+"
		}
		s += t.Name
	}
	return s
}

// BackgroundAnalysis runs for the whole canary, from StartingStep on.
type BackgroundAnalysis struct {
	Analysis
	StartingStep int32 `json:"startingStep,omitempty"`
}

// TemplateRef names an AnalysisTemplate (or a ClusterAnalysisTemplate
// when ClusterScope is set).
type TemplateRef struct {
	Name         string `json:"templateName"`
	ClusterScope bool   `json:"clusterScope,omitempty"`
}

// Arg is an argument given to analysis templates. Value is set for literal
// arguments; ValueFrom describes Argo's valueFrom references, which sluice
// resolves where it can.
type Arg struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	ValueFrom string `json:"valueFrom,omitempty"`
}

// StringMatch matches a string by exactly one of Exact, Prefix or Regex (RE2).
type StringMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Regex  string `json:"regex,omitempty"`
}

// HeaderMatch matches one request header. A match on header "cookie" is a
// cookie match: Exact is "name=value" and is matched as one cookie pair.
type HeaderMatch struct {
	HeaderName  string      `json:"headerName"`
	HeaderValue StringMatch `json:"headerValue"`
}

// IsCookie reports whether the match is on the Cookie header.
func (m HeaderMatch) IsCookie() bool { return strings.EqualFold(m.HeaderName, "cookie") }

// HeaderRoute sends requests matching all of Match to the canary. An empty
// Match removes the route.
type HeaderRoute struct {
	Name  string        `json:"name"`
	Match []HeaderMatch `json:"match,omitempty"`
}

func (h *HeaderRoute) String() string {
	if len(h.Match) == 0 {
		return "remove header route " + h.Name
	}
	return "header route " + h.Name
}

// RouteMatch is one mirror match: all set parts must match.
type RouteMatch struct {
	Method  *StringMatch           `json:"method,omitempty"`
	Path    *StringMatch           `json:"path,omitempty"`
	Headers map[string]StringMatch `json:"headers,omitempty"`
}

// MirrorRoute copies Percentage % of matching requests to the canary.
// An empty Match removes the route.
type MirrorRoute struct {
	Name       string       `json:"name"`
	Match      []RouteMatch `json:"match,omitempty"`
	Percentage int32        `json:"percentage"`
}

func (m *MirrorRoute) String() string {
	if len(m.Match) == 0 {
		return "remove mirror route " + m.Name
	}
	return fmt.Sprintf("mirror route %s %d%%", m.Name, m.Percentage)
}

// CanaryScale is setCanaryScale (Kubernetes mode).
type CanaryScale struct {
	Weight             *int32 `json:"weight,omitempty"`
	Replicas           *int32 `json:"replicas,omitempty"`
	MatchTrafficWeight bool   `json:"matchTrafficWeight,omitempty"`
}

// XDSConfig is the trafficRouting.plugins["sluice.io/xds"] block.
type XDSConfig struct {
	// Host is the virtual host domain and the gRPC target xds:///Host.
	// For a blue-green rollout it is the active host.
	Host string `json:"host"`
	// PreviewHost (blue-green only) routes every request to the new
	// version while it waits for promotion, and to the active version
	// otherwise.
	PreviewHost string `json:"previewHost,omitempty"`
	// Endpoints maps a version (image) to its addresses (host:port).
	Endpoints       map[string][]string `json:"endpoints,omitempty"`
	SessionAffinity *SessionAffinity    `json:"sessionAffinity,omitempty"`
	// MaxUnapprovedWeightJump is the risky-change threshold in points
	// (0 means the default, 25).
	MaxUnapprovedWeightJump int32 `json:"maxUnapprovedWeightJump,omitempty"`
}

// SessionAffinity keeps users who reached the canary on it (sticky canary).
type SessionAffinity struct {
	CookieName string `json:"cookieName"`
	MaxAge     int64  `json:"maxAge,omitempty"`
	// PinStable pins users who reached stable to it too (cookie value
	// "stable"), so that no session moves between versions during a step.
	PinStable bool `json:"pinStable,omitempty"`
}
