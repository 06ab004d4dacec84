package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/labels"
)

// Annotations of a rollout that spans clusters (Argo's schema has no place
// for them).
const (
	ClustersAnnotation      = "sluice.io/clusters"
	WavesAnnotation         = "sluice.io/waves"
	WaveSoakAnnotation      = "sluice.io/wave-soak"
	OnWaveFailureAnnotation = "sluice.io/on-wave-failure"
)

// What a wave failure does to the clusters of earlier waves.
const (
	OnWaveFailureRollbackAll = "rollback-all"
	OnWaveFailureHold        = "hold"
)

// Placement is where a rollout runs beyond the home cluster, and in which
// order: the clusters whose labels Clusters selects, in Waves (sizes as
// scheduler/global plans them), WaveSoak apart, with OnWaveFailure on a
// failure. It is nil when the rollout names no clusters: it runs in the
// home cluster only.
type Placement struct {
	Clusters      string        `json:"clusters"`
	Waves         []WaveSize    `json:"waves"`
	WaveSoak      time.Duration `json:"waveSoak,omitempty"`
	OnWaveFailure string        `json:"onWaveFailure"`
}

// placement reads the multi-cluster annotations.
func (c *checker) placement(ro *v1alpha1.Rollout) *Placement {
	a := ro.Annotations
	sel, hasClusters := a[ClustersAnnotation]
	if !hasClusters {
		for _, name := range []string{WavesAnnotation, WaveSoakAnnotation, OnWaveFailureAnnotation} {
			if _, ok := a[name]; ok {
				c.warnf(annotationPath(name), "has no effect without %s", ClustersAnnotation)
			}
		}
		return nil
	}
	p := &Placement{Clusters: sel, OnWaveFailure: OnWaveFailureRollbackAll}
	if _, err := labels.Parse(sel); err != nil || sel == "" {
		c.errorf(annotationPath(ClustersAnnotation), "not a label selector over cluster labels (e.g. \"region in (eu,us)\"): %v", orEmpty(err))
	}
	waves, err := ParseWaves(a[WavesAnnotation])
	if err != nil {
		c.errorf(annotationPath(WavesAnnotation), "%v (e.g. \"1,50%%,100%%\")", err)
	}
	p.Waves = waves
	if s, ok := a[WaveSoakAnnotation]; ok {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			c.errorf(annotationPath(WaveSoakAnnotation), "not a duration such as 10m, got %q", s)
		}
		p.WaveSoak = d
	}
	if f, ok := a[OnWaveFailureAnnotation]; ok {
		if f != OnWaveFailureRollbackAll && f != OnWaveFailureHold {
			c.errorf(annotationPath(OnWaveFailureAnnotation), "must be %s or %s, got %q", OnWaveFailureRollbackAll, OnWaveFailureHold, f)
		}
		p.OnWaveFailure = f
	}
	c.placementLimits(ro)
	return p
}

// placementLimits refuses what a rollout across clusters cannot do yet,
// each at its own field: it runs in Kubernetes mode only, as a canary or a
// blue-green rollout (each part switches its own cluster's Services and
// routes, in its wave), moving traffic by replica counts, through sluice's
// xDS (each cluster's clients get their own cluster's part,
// gateway/views.go) or through each cluster's own routers (Services,
// Gateway API, Istio: the daemon writes each part's routes in its own
// cluster), on its own pod template.
func (c *checker) placementLimits(ro *v1alpha1.Rollout) {
	if c.mode != ModeKubernetes {
		c.errorf(annotationPath(ClustersAnnotation), "a rollout across clusters runs in Kubernetes mode only (sluice run --kubernetes, sluice validate --kubernetes)")
		return
	}
	if ro.Spec.WorkloadRef != nil {
		c.errorf("spec.workloadRef", "not supported with %s yet: a rollout across clusters runs from spec.template", ClustersAnnotation)
	}
}

func annotationPath(name string) string { return "metadata.annotations[" + name + "]" }

func orEmpty(err error) error {
	if err == nil {
		return fmt.Errorf("empty")
	}
	return err
}

// ClusterSeparator joins a rollout's name and a cluster's in the key of the
// rollout's part in that cluster ("checkout@eu-1"). Kubernetes names
// cannot hold it, so a part's key never collides with a rollout's.
const ClusterSeparator = "@"

// InCluster is the key of the rollout's part in cluster.
func (k Key) InCluster(cluster string) Key {
	return Key{Namespace: k.Namespace, Name: k.Name + ClusterSeparator + cluster}
}

// Cluster is the cluster a part's key names; "" for a rollout's own key.
func (k Key) Cluster() string {
	if i := strings.LastIndex(k.Name, ClusterSeparator); i >= 0 {
		return k.Name[i+1:]
	}
	return ""
}

// Parent is the rollout a part's key belongs to (the key itself for a
// rollout's own key).
func (k Key) Parent() Key {
	if i := strings.LastIndex(k.Name, ClusterSeparator); i >= 0 {
		return Key{Namespace: k.Namespace, Name: k.Name[:i]}
	}
	return k
}

// WaveSeat is a rollout's part in one cluster of a multi-cluster rollout:
// which cluster, which wave, and what the part does once its steps are
// done. The daemon sets it when it expands a rollout over its clusters;
// it is never read from a file.
type WaveSeat struct {
	Cluster string `json:"cluster"`
	// Wave is the part's wave, from 1, of Waves.
	Wave  int `json:"wave"`
	Waves int `json:"waves"`
	// HoldAtFull: once its steps are done the part holds at 100 % with the
	// old stable still running, until every wave has passed (then it
	// promotes) or a later wave fails (then it aborts back to the old
	// stable). Set with on-wave-failure rollback-all for every wave but
	// the last.
	HoldAtFull bool `json:"holdAtFull,omitempty"`
	// Reason is why the global layer put the cluster in this wave.
	Reason string `json:"reason,omitempty"`
}
