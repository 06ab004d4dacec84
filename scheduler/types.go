package scheduler

// Resources is an amount of the resources the scheduler accounts for.
// Pods counts pod slots (a node's max pods).
type Resources struct {
	MilliCPU int64 `json:"milliCPU"`
	Memory   int64 `json:"memory"`
	Pods     int64 `json:"pods"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{MilliCPU: r.MilliCPU + o.MilliCPU, Memory: r.Memory + o.Memory, Pods: r.Pods + o.Pods}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{MilliCPU: r.MilliCPU - o.MilliCPU, Memory: r.Memory - o.Memory, Pods: r.Pods - o.Pods}
}

// TaintEffect is what a taint does to pods that do not tolerate it.
type TaintEffect string

// Taint effects, as in corev1.
const (
	TaintNoSchedule       TaintEffect = "NoSchedule"
	TaintPreferNoSchedule TaintEffect = "PreferNoSchedule"
	TaintNoExecute        TaintEffect = "NoExecute"
)

// Taint is a node taint (corev1.Taint without the timestamp).
type Taint struct {
	Key    string      `json:"key"`
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
}

// TolerationOperator is Equal (the default) or Exists.
type TolerationOperator string

// Toleration operators, as in corev1.
const (
	TolerationEqual  TolerationOperator = "Equal"
	TolerationExists TolerationOperator = "Exists"
)

// Toleration is a pod toleration (corev1.Toleration without seconds). An
// empty Key with operator Exists tolerates every taint; an empty Effect
// matches every effect.
type Toleration struct {
	Key      string             `json:"key,omitempty"`
	Operator TolerationOperator `json:"operator,omitempty"`
	Value    string             `json:"value,omitempty"`
	Effect   TaintEffect        `json:"effect,omitempty"`
}

// SelectorOperator is a node selector requirement operator.
type SelectorOperator string

// Selector operators, as in corev1.NodeSelectorOperator (Gt/Lt are not
// supported).
const (
	SelectorIn           SelectorOperator = "In"
	SelectorNotIn        SelectorOperator = "NotIn"
	SelectorExists       SelectorOperator = "Exists"
	SelectorDoesNotExist SelectorOperator = "DoesNotExist"
)

// SelectorRequirement is one node label requirement.
type SelectorRequirement struct {
	Key      string           `json:"key"`
	Operator SelectorOperator `json:"operator"`
	Values   []string         `json:"values,omitempty"`
}

// SelectorTerm is satisfied when all its requirements are.
type SelectorTerm struct {
	MatchExpressions []SelectorRequirement `json:"matchExpressions"`
}

// Node is one cluster node as the Kubernetes layer (or nodes.yaml) sees it.
type Node struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Taints []Taint           `json:"taints,omitempty"`
	// Capacity is what pods may use (allocatable in Kubernetes terms).
	Capacity Resources `json:"capacity"`
	// Allocated is what pods the scheduler does not track already use.
	Allocated Resources `json:"allocated"`
	// Heat is recent utilisation (0 cold, 1 fully busy) at the time the
	// node is added or updated; it decays exponentially (GraphOptions).
	Heat          float64 `json:"heat,omitempty"`
	Unschedulable bool    `json:"unschedulable,omitempty"`
}

// Role is what a pod is in a rollout.
type Role string

// Pod roles.
const (
	RoleStable   Role = "stable"
	RoleCanary   Role = "canary"
	RoleBaseline Role = "baseline"
)

// Pod is a pod to place (or one already placed, for AddPod).
type Pod struct {
	// Name identifies the pod (namespace/name); unique among tracked pods.
	Name string `json:"name"`
	// Group is the set of pods that are spread and isolated together, e.g.
	// "default/checkout/canary". Empty means the pod is in no group.
	Group string `json:"group,omitempty"`
	// Service is the service the pod belongs to, e.g. "default/checkout";
	// dependency affinity and critical-service isolation look at services.
	Service string `json:"service,omitempty"`
	Role    Role   `json:"role,omitempty"`
	// Requests are the resources the pod needs; one pod slot is implied.
	Requests     Resources         `json:"requests"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// RequiredAffinity terms are ORed (requiredDuringScheduling...).
	RequiredAffinity []SelectorTerm `json:"requiredAffinity,omitempty"`
	Tolerations      []Toleration   `json:"tolerations,omitempty"`
	// Dependencies are services this pod talks to; nodes near their pods
	// score higher.
	Dependencies []string `json:"dependencies,omitempty"`
	// MatchGroup is, for a baseline pod, the canary group whose zones and
	// node types it should mirror.
	MatchGroup string `json:"matchGroup,omitempty"`
}
