package gatewayapi

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RulePrefix starts the name of every rule sluice inserts; a rule with
// another name (or none) is the user's.
const RulePrefix = "sluice-"

// Rule names sluice inserts, by kind; the route name follows.
const (
	headerRulePrefix = RulePrefix + "header-"
	mirrorRulePrefix = RulePrefix + "mirror-"
	stickyRuleName   = RulePrefix + "sticky"
	// stickyStableRuleName pins stable users (SessionAffinity.PinStable).
	stickyStableRuleName = RulePrefix + "sticky-stable"
)

var sectionName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ruleName is prefix+route as a valid SectionName. Argo route names may
// hold characters a SectionName may not: those become '-' and a short
// hash of the original keeps two such names apart.
func ruleName(prefix, route string) *gwv1.SectionName {
	n := prefix + route
	if !sectionName.MatchString(n) || len(n) > 63 {
		sum := sha256.Sum256([]byte(route))
		clean := strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(route), "-"), "-")
		n = prefix + clean
		if len(n) > 54 {
			n = n[:54]
		}
		n = strings.TrimRight(n, "-") + "-" + hex.EncodeToString(sum[:4])
	}
	s := gwv1.SectionName(n)
	return &s
}

// isSluiceRule reports whether a rule is one sluice inserted.
func isSluiceRule(name *gwv1.SectionName) bool {
	return name != nil && strings.HasPrefix(string(*name), RulePrefix)
}
