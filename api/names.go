package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxReplicas is the most pods sluice accepts for one side of a rollout
// (spec.replicas and a step's setCanaryScale.replicas). Kubernetes' own
// scalability thresholds are 110 pods per node and 150,000 pods per
// cluster; a single ReplicaSet of 10,000 pods is already far beyond any
// practical service, while a value near 2^31 only makes the scheduler and
// the workload code allocate per pod until memory runs out (`sluice
// schedule` reached 2 GB in 20 s with replicas 2147483647).
const MaxReplicas = 10_000

// objectNames checks metadata.name and metadata.namespace the way
// Kubernetes checks a namespace: a DNS-1123 label. sluice builds resource
// names from them (clusters "<namespace>/<name>/stable", ReplicaSets
// "<name>-<hash>"), so a '/' or '.' in either would let one rollout's
// names collide with another's ("b/stable" as a name).
func (c *checker) objectNames(name, namespace string) {
	if name != "" {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			c.errorf("metadata.name", "%q is not a DNS-1123 label (as Kubernetes requires of names sluice builds resources from): %s", name, strings.Join(errs, "; "))
		}
	}
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			c.errorf("metadata.namespace", "%q is not a DNS-1123 label (as Kubernetes requires of a namespace): %s", namespace, strings.Join(errs, "; "))
		}
	}
}

// replicasAtMost rejects a pod count above MaxReplicas.
func (c *checker) replicasAtMost(path string, v *int32) {
	if v != nil && *v > MaxReplicas {
		c.errorf(path, "%d is more than sluice's maximum of %d pods per side (see docs/strategy-files.md)", *v, MaxReplicas)
	}
}

// HostConflict is one sluice.io/xds host that two or more valid rollouts
// of a set name, with each claimant's place in its file.
type HostConflict struct {
	Host   string      `json:"host"`
	Claims []HostClaim `json:"claims"`
}

// HostClaim is one rollout naming a host: its key and the file and line
// of its host field.
type HostClaim struct {
	Key  Key    `json:"key"`
	File string `json:"file"`
	Line int    `json:"line"`
}

// HostField is the field path of a rollout's sluice.io/xds host.
const HostField = xdsPath + ".host"

// Diagnostic is the error of claimant c: it names the other claimants'
// files and lines.
func (hc HostConflict) Diagnostic(c HostClaim) Diagnostic {
	var others []string
	for _, o := range hc.Claims {
		if o.Key != c.Key {
			others = append(others, fmt.Sprintf("rollout %s (%s:%d)", o.Key, o.File, o.Line))
		}
	}
	return Diagnostic{File: c.File, Line: c.Line, Field: HostField, Severity: SeverityError,
		Message: fmt.Sprintf("host %q is also claimed by %s: one host has one owner (the daemon keeps the rollout that held it first and refuses the others)", hc.Host, strings.Join(others, ", "))}
}

// HostDiagnostics are the errors of every claimant of every conflict.
func (s *Set) HostDiagnostics() Diagnostics {
	var out Diagnostics
	for _, hc := range s.HostConflicts {
		for _, c := range hc.Claims {
			out = append(out, hc.Diagnostic(c))
		}
	}
	return out
}

// hostConflicts finds every host that two or more of the accepted
// rollouts claim (docs[i] is rollouts[i]'s document), in the order the
// hosts first appear. One host has one owner: two rollouts publishing one
// virtual host would let either take the other's traffic. The rollouts
// stay in the set: which one owns the host is the controller's decision
// (the one that held it first), not the files'.
func hostConflicts(docs []*document, rollouts []*Rollout) []HostConflict {
	index := map[string]int{}
	var all []HostConflict
	for i, r := range rollouts {
		if r.XDS == nil || r.XDS.Host == "" {
			continue
		}
		claim := HostClaim{Key: r.Key, File: r.File, Line: docs[i].walk.line(HostField)}
		j, seen := index[r.XDS.Host]
		if !seen {
			j = len(all)
			index[r.XDS.Host] = j
			all = append(all, HostConflict{Host: r.XDS.Host})
		}
		all[j].Claims = append(all[j].Claims, claim)
	}
	var out []HostConflict
	for _, hc := range all {
		if len(hc.Claims) > 1 {
			out = append(out, hc)
		}
	}
	return out
}
