package api

import (
	"fmt"
	"slices"
	"strings"
)

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
	// Field is the claiming field when it is not HostField (a blue-green
	// rollout's sluice.io/xds annotation).
	Field string `json:"field,omitempty"`
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
	field := HostField
	if c.Field != "" {
		field = c.Field
	}
	return Diagnostic{File: c.File, Line: c.Line, Field: field, Severity: SeverityError,
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
		for _, hc := range hostClaims(r, docs[i]) {
			j, seen := index[hc.host]
			if !seen {
				j = len(all)
				index[hc.host] = j
				all = append(all, HostConflict{Host: hc.host})
			}
			all[j].Claims = append(all[j].Claims, hc.claim)
		}
	}
	var out []HostConflict
	for _, hc := range all {
		if len(hc.Claims) > 1 {
			out = append(out, hc)
		}
	}
	return out
}

// hostClaim is one host a rollout claims.
type hostClaim struct {
	host  string
	claim HostClaim
}

// hostClaims are the hosts r claims: its sluice.io/xds host, and a
// blue-green rollout's preview host (both in the annotation).
func hostClaims(r *Rollout, doc *document) []hostClaim {
	if r.XDS == nil || r.XDS.Host == "" {
		return nil
	}
	if !r.IsBlueGreen() {
		return []hostClaim{{r.XDS.Host, HostClaim{Key: r.Key, File: r.File, Line: doc.walk.line(HostField)}}}
	}
	var out []hostClaim
	for field, host := range map[string]string{xdsAnnotationPath + ".host": r.XDS.Host, xdsAnnotationPath + ".previewHost": r.XDS.PreviewHost} {
		if host != "" {
			out = append(out, hostClaim{host, HostClaim{Key: r.Key, File: r.File, Line: doc.walk.line(xdsAnnotationPath), Field: field}})
		}
	}
	slices.SortFunc(out, func(a, b hostClaim) int { return strings.Compare(a.claim.Field, b.claim.Field) })
	return out
}
