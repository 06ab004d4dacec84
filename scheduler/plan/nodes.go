package plan

import (
	"bytes"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/scheduler"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// Cluster is the nodes file: the nodes, optionally the topology keys to
// build domains from, and pods already running (dependencies, critical
// services) that placements should see.
//
//	topologyKeys: [topology.kubernetes.io/zone, topology.sluice.io/rack]
//	nodes:
//	- name: z0-r0-n0
//	  labels: {topology.kubernetes.io/zone: zone-0, ...}
//	  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
//	  capacity: {cpu: "4", memory: 16Gi, pods: 110}
//	  allocated: {cpu: 500m, memory: 1Gi, pods: 3}
//	  heat: 0.3
//	pods:
//	- {name: db-0, service: default/db, node: z0-r0-n0, cpu: 500m, memory: 1Gi}
//
// A file that is a bare list is read as the nodes alone.
type Cluster struct {
	TopologyKeys []string     `json:"topologyKeys,omitempty"`
	Nodes        []NodeSpec   `json:"nodes"`
	Pods         []RunningPod `json:"pods,omitempty"`
}

// NodeSpec is one node in the nodes file.
type NodeSpec struct {
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels,omitempty"`
	Taints        []scheduler.Taint `json:"taints,omitempty"`
	Capacity      Resources         `json:"capacity"`
	Allocated     Resources         `json:"allocated,omitempty"`
	Heat          float64           `json:"heat,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
}

// Resources are Kubernetes quantities ("500m", "16Gi").
type Resources struct {
	CPU    *resource.Quantity `json:"cpu,omitempty"`
	Memory *resource.Quantity `json:"memory,omitempty"`
	Pods   int64              `json:"pods,omitempty"`
}

// RunningPod is a pod already on a node.
type RunningPod struct {
	Name    string             `json:"name"`
	Service string             `json:"service"`
	Node    string             `json:"node"`
	CPU     *resource.Quantity `json:"cpu,omitempty"`
	Memory  *resource.Quantity `json:"memory,omitempty"`
}

func (r Resources) scheduler() scheduler.Resources {
	return scheduler.Resources{MilliCPU: milli(r.CPU), Memory: value(r.Memory), Pods: r.Pods}
}

func milli(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.MilliValue()
}

func value(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}

// ReadCluster reads a nodes file, rejecting unknown fields.
func ReadCluster(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	c, err := ParseCluster(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCluster decodes a nodes file.
func ParseCluster(data []byte) (*Cluster, error) {
	var c Cluster
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '-' {
		if err := yaml.UnmarshalStrict(data, &c.Nodes); err != nil {
			return nil, fmt.Errorf("decode nodes: %w", err)
		}
	} else if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("decode nodes: %w", err)
	}
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		switch {
		case n.Name == "":
			return nil, fmt.Errorf("nodes[%d]: name is required", i)
		case seen[n.Name]:
			return nil, fmt.Errorf("nodes[%d]: duplicate node %q", i, n.Name)
		case n.Capacity.CPU == nil || n.Capacity.Memory == nil || n.Capacity.Pods <= 0:
			return nil, fmt.Errorf("nodes[%d] (%s): capacity needs cpu, memory and pods", i, n.Name)
		case n.Heat < 0:
			return nil, fmt.Errorf("nodes[%d] (%s): heat %g is negative", i, n.Name, n.Heat)
		}
		seen[n.Name] = true
	}
	for i, p := range c.Pods {
		if p.Name == "" || p.Service == "" || !seen[p.Node] {
			return nil, fmt.Errorf("pods[%d]: needs name, service and a known node (got %q)", i, p.Node)
		}
	}
	return &c, nil
}

// node converts a NodeSpec for the scheduler.
func (n NodeSpec) node() scheduler.Node {
	return scheduler.Node{
		Name: n.Name, Labels: n.Labels, Taints: n.Taints,
		Capacity: n.Capacity.scheduler(), Allocated: n.Allocated.scheduler(),
		Heat: n.Heat, Unschedulable: n.Unschedulable,
	}
}
