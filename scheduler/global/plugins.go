package global

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/scheduler"
)

// Names of the in-tree cluster plugins.
const (
	ClusterSelectorName    = "ClusterSelector"
	ReachableName          = "Reachable"
	ReachableFirstName     = "ReachableFirst"
	FewestStablePodsName   = "FewestStablePods"
	LowestRequestShareName = "LowestRequestShare"
)

// NewInTreeRegistry returns the factories of every built-in cluster
// plugin.
func NewInTreeRegistry() Registry {
	return Registry{
		ClusterSelectorName:    noArgs(ClusterSelector{}),
		ReachableName:          noArgs(Reachable{}),
		ReachableFirstName:     noArgs(ReachableFirst{}),
		FewestStablePodsName:   noArgs(FewestStablePods{}),
		LowestRequestShareName: noArgs(LowestRequestShare{}),
	}
}

// DefaultPlugins is the profile Plan and Expand use: the selector, then
// the blast radius (reachable clusters first, then the fewest stable
// pods, then the lowest request share). The Reachable filter is not in
// it: a cluster it drops gets no part, so what runs there is left out of
// the rollout, and a cluster that comes back mid-version has no seat: it
// joins the version's plan late (joinPlan, docs/multi-cluster.md).
func DefaultPlugins() []scheduler.PluginConfig {
	return []scheduler.PluginConfig{
		{Name: ClusterSelectorName},
		{Name: ReachableFirstName},
		{Name: FewestStablePodsName},
		{Name: LowestRequestShareName},
	}
}

// noArgs is the factory of a plugin that takes no args.
func noArgs(p scheduler.Plugin) PluginFactory {
	return func(args any) (scheduler.Plugin, error) {
		if args != nil {
			return nil, fmt.Errorf("takes no args, got %T", args)
		}
		return p, nil
	}
}

// ClusterSelector keeps the clusters whose labels the rollout's
// sluice.io/clusters selector matches.
type ClusterSelector struct{}

var notSelected = scheduler.NewStatus(scheduler.UnschedulableAndUnresolvable, "labels do not match the selector").WithPlugin(ClusterSelectorName)

// Name is ClusterSelectorName.
func (ClusterSelector) Name() string { return ClusterSelectorName }

// Filter rejects a cluster the selector does not match.
func (ClusterSelector) Filter(req *Request, c *Cluster) *scheduler.Status {
	if req.Selector.Matches(labels.Set(c.Labels)) {
		return nil
	}
	return notSelected
}

// Reachable drops the clusters that cannot be reached when the plan is
// made. It is not enabled by default (see DefaultPlugins).
type Reachable struct{}

// Name is ReachableName.
func (Reachable) Name() string { return ReachableName }

// Filter rejects an unreachable cluster with why it is.
func (Reachable) Filter(_ *Request, c *Cluster) *scheduler.Status {
	if c.Unreachable == "" {
		return nil
	}
	return scheduler.NewStatus(scheduler.Unschedulable, c.Unreachable).WithPlugin(ReachableName)
}

// ReachableFirst plans reachable clusters before unreachable ones: an
// unreachable cluster's pods cannot be read (it looks empty, the smallest
// of all), and while it is unreachable its wave cannot pass, so in wave 1
// it would hold every cluster.
type ReachableFirst struct{}

// Name is ReachableFirstName.
func (ReachableFirst) Name() string { return ReachableFirstName }

// Score is 0 for a reachable cluster, -1 for an unreachable one.
func (ReachableFirst) Score(_ *Request, c *Cluster) int64 {
	if c.Unreachable != "" {
		return -1
	}
	return 0
}

// Explain names the unreachable candidates, when first is reachable and
// some are not.
func (ReachableFirst) Explain(_ *Request, first *Cluster, candidates []Cluster) string {
	if first.Unreachable != "" {
		return ""
	}
	var down []string
	for _, c := range candidates {
		if c.Unreachable != "" {
			down = append(down, c.Name)
		}
	}
	if len(down) == 0 {
		return ""
	}
	return strings.Join(down, ", ") + " unreachable"
}

// FewestStablePods plans the clusters with the fewest Ready pods of the
// rollout's stable version first: the smallest blast radius.
type FewestStablePods struct{}

// Name is FewestStablePodsName.
func (FewestStablePods) Name() string { return FewestStablePodsName }

// Score is minus the stable pods.
func (FewestStablePods) Score(_ *Request, c *Cluster) int64 { return -int64(c.StablePods) }

// Explain: "smallest: 3 of 24 stable pods".
func (FewestStablePods) Explain(_ *Request, first *Cluster, candidates []Cluster) string {
	total := 0
	for _, c := range candidates {
		total += c.StablePods
	}
	return fmt.Sprintf("smallest: %d of %d stable pods", first.StablePods, total)
}

// LowestRequestShare plans the clusters with the lowest observed share of
// the rollout's requests first. A cluster whose share is not known comes
// after every cluster whose share is (it may take any share).
type LowestRequestShare struct{}

// Name is LowestRequestShareName.
func (LowestRequestShare) Name() string { return LowestRequestShareName }

// shareUnit is the score's resolution: shares that differ by less than a
// millionth are equal.
const shareUnit = 1_000_000

// Score is minus the share in millionths; math.MinInt64 when unknown.
func (LowestRequestShare) Score(_ *Request, c *Cluster) int64 {
	if !c.RequestShareKnown {
		return math.MinInt64
	}
	return -int64(math.Round(c.RequestShare * shareUnit))
}

// Explain: "10 % of requests", when first's share is known.
func (LowestRequestShare) Explain(_ *Request, first *Cluster, _ []Cluster) string {
	if !first.RequestShareKnown {
		return ""
	}
	return percent(first.RequestShare) + " % of requests"
}

// percent writes a share (0..1) as a percentage with at most one decimal:
// 0.1 is "10", 0.125 "12.5".
func percent(share float64) string {
	return strconv.FormatFloat(math.Round(share*1000)/10, 'f', -1, 64)
}
