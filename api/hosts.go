package api

import (
	"fmt"
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
