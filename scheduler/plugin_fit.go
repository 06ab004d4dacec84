package scheduler

import (
	"context"
	"fmt"
)

// NodeResourcesFitName is the name of the resource fit filter.
const NodeResourcesFitName = "NodeResourcesFit"

// Fit rejects nodes without room for the pod's CPU, memory or pod slot.
type Fit struct {
	g                                                *Graph
	insufficientCPU, insufficientMemory, tooManyPods *Status
}

var (
	_ FilterPlugin      = &Fit{}
	_ BatchFilterPlugin = &Fit{}
	_ FilterExplainer   = &Fit{}
)

// NewFit builds the resource fit filter. It takes no args.
func NewFit(args any, h Handle) (Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: unexpected args %T", NodeResourcesFitName, args)
	}
	return &Fit{
		g:                  h.Graph(),
		insufficientCPU:    NewStatus(Unschedulable, "Insufficient cpu").WithPlugin(NodeResourcesFitName),
		insufficientMemory: NewStatus(Unschedulable, "Insufficient memory").WithPlugin(NodeResourcesFitName),
		tooManyPods:        NewStatus(Unschedulable, "Too many pods").WithPlugin(NodeResourcesFitName),
	}, nil
}

// Name implements Plugin.
func (f *Fit) Name() string { return NodeResourcesFitName }

// Filter implements FilterPlugin.
func (f *Fit) Filter(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) *Status {
	switch r := pod.Requests; {
	case r.Pods > n.free.Pods:
		return f.tooManyPods
	case r.MilliCPU > n.free.MilliCPU:
		return f.insufficientCPU
	case r.Memory > n.free.Memory:
		return f.insufficientMemory
	}
	return nil
}

// FilterNodes implements BatchFilterPlugin.
func (f *Fit) FilterNodes(_ context.Context, _ *CycleState, pod *PodInfo, ids []int32, rej *Rejections) []int32 {
	r, nodes, kept := pod.Requests, f.g.nodes, ids[:0]
	for _, id := range ids {
		free := &nodes[id].free
		switch {
		case r.Pods > free.Pods:
			rej.Add(f.tooManyPods)
		case r.MilliCPU > free.MilliCPU:
			rej.Add(f.insufficientCPU)
		case r.Memory > free.Memory:
			rej.Add(f.insufficientMemory)
		default:
			kept = append(kept, id)
		}
	}
	return kept
}

// ExplainFilter implements FilterExplainer.
func (f *Fit) ExplainFilter(_ *CycleState, pod *PodInfo, n *NodeState) string {
	free := n.free
	r := pod.Requests
	return fmt.Sprintf("free cpu %dm memory %d pods %d; pod needs cpu %dm memory %d", free.MilliCPU, free.Memory, free.Pods, r.MilliCPU, r.Memory)
}
