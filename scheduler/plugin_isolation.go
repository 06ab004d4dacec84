package scheduler

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// FailureDomainName is the name of the failure-domain isolation filter.
const FailureDomainName = "FailureDomain"

// FailureDomainArgs configures failure-domain isolation.
type FailureDomainArgs struct {
	// TopologyKey names the failure domain (default the zone key when the
	// graph has it, otherwise the innermost key). It must be a graph key.
	TopologyKey string
	// MaxSkew is the most a group's pod count in one domain may exceed its
	// count in the emptiest eligible domain (default 1).
	MaxSkew int32
	// CriticalServices are services whose domains pods of other services
	// must avoid entirely.
	CriticalServices []string
}

// FailureDomain keeps a group's pods spread over failure domains: a pod may
// go to domain d only if count(d)+1 - min(count) ≤ MaxSkew, where min runs
// over the domains that have live nodes carrying the key and host no
// critical service. Nodes without the key and domains of critical services
// are rejected. This is kube-scheduler's PodTopologySpread with
// whenUnsatisfiable: DoNotSchedule, except that eligible domains are not
// narrowed by the pod's node affinity (that would cost a pass over all
// nodes per pod).
type FailureDomain struct {
	args     FailureDomainArgs
	g        *Graph
	level    int
	key      StateKey
	critical []int32 // counter IDs, -1 until the service has pods

	noKey, inCritical, skew *Status
}

type failureDomainState struct {
	min      int32
	skip     bool
	critical []int32   // critical services other than the pod's own
	verdicts []*Status // per domain ID, for FilterDomains
}

var (
	_ PreFilterPlugin    = &FailureDomain{}
	_ FilterPlugin       = &FailureDomain{}
	_ DomainFilterPlugin = &FailureDomain{}
	_ FilterExplainer    = &FailureDomain{}
)

// NewFailureDomain builds the filter from *FailureDomainArgs (nil means
// defaults).
func NewFailureDomain(args any, h Handle) (Plugin, error) {
	g := h.Graph()
	var a FailureDomainArgs
	switch v := args.(type) {
	case nil:
	case *FailureDomainArgs:
		a = *v
	default:
		return nil, fmt.Errorf("%s: args %T, want *FailureDomainArgs", FailureDomainName, args)
	}
	if a.TopologyKey == "" {
		a.TopologyKey = defaultDomainKey(g)
	}
	if a.MaxSkew == 0 {
		a.MaxSkew = 1
	}
	if a.MaxSkew < 0 {
		return nil, fmt.Errorf("%s: maxSkew %d must be positive", FailureDomainName, a.MaxSkew)
	}
	l := g.Level(a.TopologyKey)
	if l < 0 {
		return nil, fmt.Errorf("%s: topology key %q is not one of the graph's %v", FailureDomainName, a.TopologyKey, g.opts.TopologyKeys)
	}
	p := &FailureDomain{args: a, g: g, level: l, key: h.StateKey()}
	for range a.CriticalServices {
		p.critical = append(p.critical, -1)
	}
	p.noKey = NewStatus(UnschedulableAndUnresolvable, "node(s) didn't have the "+a.TopologyKey+" label").WithPlugin(FailureDomainName)
	p.inCritical = NewStatus(UnschedulableAndUnresolvable, "node(s) in a failure domain of a critical service").WithPlugin(FailureDomainName)
	p.skew = NewStatus(Unschedulable, fmt.Sprintf("node(s) didn't satisfy maxSkew %d on %s", a.MaxSkew, a.TopologyKey)).WithPlugin(FailureDomainName)
	return p, nil
}

// defaultDomainKey is the zone key when the graph has it, else its
// innermost key.
func defaultDomainKey(g *Graph) string {
	if g.Level(LabelZone) >= 0 {
		return LabelZone
	}
	return g.opts.TopologyKeys[len(g.opts.TopologyKeys)-1]
}

// Name implements Plugin.
func (p *FailureDomain) Name() string { return FailureDomainName }

// Args returns the args with defaults filled.
func (p *FailureDomain) Args() FailureDomainArgs { return p.args }

// PreFilter implements PreFilterPlugin: it resolves the critical services
// and the minimum group count over eligible domains.
func (p *FailureDomain) PreFilter(_ context.Context, state *CycleState, pod *PodInfo) *Status {
	st, _ := state.Read(p.key).(*failureDomainState)
	if st == nil {
		st = &failureDomainState{}
		state.Write(p.key, st)
	}
	st.critical = st.critical[:0]
	for i, name := range p.args.CriticalServices {
		if p.critical[i] < 0 {
			p.critical[i] = p.g.counterID(name)
		}
		if c := p.critical[i]; c >= 0 && c != pod.service {
			st.critical = append(st.critical, c)
		}
	}
	st.skip = pod.group < 0
	if st.skip {
		return nil
	}
	counts := p.g.counters[pod.group].dom
	st.min = math.MaxInt32
	for _, d := range p.g.level[p.level] {
		if p.g.domains[d].size() == 0 || p.g.domains[d].value == 0 || p.avoided(st, d) {
			continue
		}
		st.min = min(st.min, counts[d])
	}
	return nil
}

func (p *FailureDomain) avoided(st *failureDomainState, d int32) bool {
	for _, c := range st.critical {
		if p.g.counters[c].dom[d] > 0 {
			return true
		}
	}
	return false
}

// Filter implements FilterPlugin.
func (p *FailureDomain) Filter(_ context.Context, state *CycleState, pod *PodInfo, n *NodeState) *Status {
	return p.domainVerdict(state.Read(p.key).(*failureDomainState), pod, n.dom[p.level])
}

// FilterDomains implements DomainFilterPlugin: the verdict of Filter for
// each domain at the plugin's level.
func (p *FailureDomain) FilterDomains(_ context.Context, state *CycleState, pod *PodInfo) (int, []*Status) {
	st := state.Read(p.key).(*failureDomainState)
	if cap(st.verdicts) < len(p.g.domains) {
		st.verdicts = make([]*Status, len(p.g.domains), 2*len(p.g.domains))
	}
	st.verdicts = st.verdicts[:len(p.g.domains)]
	for _, d := range p.g.level[p.level] {
		st.verdicts[d] = p.domainVerdict(st, pod, d)
	}
	return p.level, st.verdicts
}

func (p *FailureDomain) domainVerdict(st *failureDomainState, pod *PodInfo, d int32) *Status {
	if p.g.domains[d].value == 0 {
		return p.noKey
	}
	if p.avoided(st, d) {
		return p.inCritical
	}
	if !st.skip && p.g.counters[pod.group].dom[d]+1-st.min > p.args.MaxSkew {
		return p.skew
	}
	return nil
}

// ExplainFilter implements FilterExplainer.
func (p *FailureDomain) ExplainFilter(state *CycleState, pod *PodInfo, n *NodeState) string {
	st := state.Read(p.key).(*failureDomainState)
	d := n.dom[p.level]
	name := p.g.domainName(d)
	switch p.domainVerdict(st, pod, d) {
	case p.noKey:
		return "node has no " + p.args.TopologyKey + " label"
	case p.inCritical:
		var crit []string
		for _, c := range st.critical {
			if p.g.counters[c].dom[d] > 0 {
				crit = append(crit, p.g.counterNm[c])
			}
		}
		return fmt.Sprintf("%s hosts critical %s", name, strings.Join(crit, ", "))
	case p.skew:
		return fmt.Sprintf("%s has %d pods of %s, the emptiest eligible domain %d", name, p.g.counters[pod.group].dom[d], pod.Pod.Group, st.min)
	}
	return ""
}
