package api

import (
	"fmt"
	"slices"
	"strings"
)

// Set is everything loaded from one tree of strategy files: the valid
// rollouts and templates, the rollouts that were named but rejected, and
// every diagnostic.
type Set struct {
	// Rollouts are the valid rollouts, sorted by key.
	Rollouts []*Rollout
	// Templates are the valid AnalysisTemplates and ClusterAnalysisTemplates,
	// sorted by (cluster scope, key).
	Templates []*AnalysisTemplate
	// Rejected are rollouts whose file named them but that failed to
	// validate; the controller keeps their previous good version running
	// and shows these errors in status.
	Rejected []Rejected
	// Diagnostics holds every error and warning, in file and line order.
	Diagnostics Diagnostics
	// Files lists every strategy file read, relative to the root.
	Files []string
	// Unreadable lists files with a YAML syntax error, or refused by a
	// limit (size, alias cycle or expansion): their objects are missing
	// from the set, so a caller must not read their absence as a deletion.
	Unreadable []string
	// HostConflicts are the sluice.io/xds hosts that two or more valid
	// rollouts claim. Those rollouts stay in Rollouts and their errors are
	// not in Diagnostics (HostDiagnostics has them): the controller keeps
	// the one that held the host first and refuses the others; `sluice
	// validate` reports them all.
	HostConflicts []HostConflict
	// Skipped lists documents of kinds sluice does not read.
	Skipped []SkippedDoc
	// Refused says the tree as a whole was not loaded (over a Limits file
	// count or byte total, or loading it failed): the Set holds no objects
	// and Diagnostics say why. Nothing may be read as deleted; the strategy
	// in force stays.
	Refused bool
}

// Rejected is a rollout that could be identified but not accepted.
type Rejected struct {
	Key         Key
	File        string
	Diagnostics Diagnostics
}

// Rollout returns the valid rollout with key k, or nil.
func (s *Set) Rollout(k Key) *Rollout {
	for _, r := range s.Rollouts {
		if r.Key == k {
			return r
		}
	}
	return nil
}

// Template finds the template a reference from namespace ns resolves to:
// a ClusterAnalysisTemplate when clusterScope is set, otherwise an
// AnalysisTemplate in ns.
func (s *Set) Template(ns string, ref TemplateRef) *AnalysisTemplate {
	for _, t := range s.Templates {
		if t.ClusterScoped != ref.ClusterScope || t.Name != ref.Name {
			continue
		}
		if t.ClusterScoped || t.Namespace == ns {
			return t
		}
	}
	return nil
}

// restrictNamespaces moves every valid rollout outside watched (empty:
// all) to Rejected, with an error naming its file, line and namespace.
func (s *Set) restrictNamespaces(watched []string) {
	if len(watched) == 0 {
		return
	}
	kept := s.Rollouts[:0]
	for _, r := range s.Rollouts {
		if slices.Contains(watched, r.Namespace) {
			kept = append(kept, r)
			continue
		}
		d := Diagnostic{File: r.File, Line: r.Line, Field: "metadata.namespace", Severity: SeverityError,
			Message: fmt.Sprintf("namespace %q is not watched by this sluice (--watch-namespaces %s)", r.Namespace, strings.Join(watched, ","))}
		s.Diagnostics = append(s.Diagnostics, d)
		s.Rejected = append(s.Rejected, Rejected{Key: r.Key, File: r.File, Diagnostics: Diagnostics{d}})
	}
	s.Rollouts = kept
	s.HostConflicts = s.conflictsAmongRollouts()
	sortSet(s)
}

// conflictsAmongRollouts drops from HostConflicts the claims of rollouts
// no longer in Rollouts, and the conflicts left with one claimant.
func (s *Set) conflictsAmongRollouts() []HostConflict {
	var out []HostConflict
	for _, hc := range s.HostConflicts {
		var claims []HostClaim
		for _, c := range hc.Claims {
			if s.Rollout(c.Key) != nil {
				claims = append(claims, c)
			}
		}
		if len(claims) > 1 {
			out = append(out, HostConflict{Host: hc.Host, Claims: claims})
		}
	}
	return out
}
