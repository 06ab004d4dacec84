package gateway

import "unicode/utf8"

// maxDetail bounds a client's NACK detail as it leaves the gateway: it is
// logged, kept in the rollout's state and sent in alerts, and a client may
// send megabytes.
const maxDetail = 1024

// truncatedMarker ends a detail that was cut.
const truncatedMarker = "…(truncated)"

// capDetail returns s cut to at most maxDetail bytes, marker included, on
// a UTF-8 boundary.
func capDetail(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail - len(truncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMarker
}
