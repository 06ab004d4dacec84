package gateway

import (
	"fmt"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/sluice-dev/sluice/api"
)

// Cookie matching. Neither Envoy's RouteMatch nor gRPC has a cookie matcher,
// so a match on the "cookie" header compiles to an RE2 full-match regex over
// the whole Cookie header that only accepts a complete cookie pair:
//
//	exact  "name=value"  the pair name=value, nothing more, nothing less
//	exact  "name"        a cookie called name, any value
//	prefix "name=val"    a pair that starts with name=val
//	regex  R             a pair matched entirely by R (R should not match ';')
//
// Pairs are separated by ';' (HTTP) or ',' (gRPC joins repeated metadata
// values with a comma; cookie values cannot contain either), so
// "xsluice-canary=canary" or "sluice-canary=canaryx" never match
// "sluice-canary=canary".
const (
	cookiePairStart = `^(?:.*[;,]\s*)?`
	cookiePairEnd   = `\s*(?:[;,].*)?$`
	cookieValueRest = `[^;,]*`
)

// CookieRegex returns the RE2 full-match regex over a whole Cookie header
// for one cookie match (exact "name=value", exact "name", prefix, regex),
// as described above. The Istio renderer uses it too.
func CookieRegex(m api.StringMatch) (string, error) { return cookieRegex(m) }

// cookieRegex returns the full-match regex for one cookie match.
func cookieRegex(m api.StringMatch) (string, error) {
	switch {
	case m.Exact != "" && strings.Contains(m.Exact, "="):
		return cookiePairStart + regexp.QuoteMeta(m.Exact) + cookiePairEnd, nil
	case m.Exact != "":
		return cookiePairStart + regexp.QuoteMeta(m.Exact) + "=" + cookieValueRest + cookiePairEnd, nil
	case m.Prefix != "":
		return cookiePairStart + regexp.QuoteMeta(m.Prefix) + cookieValueRest + cookiePairEnd, nil
	case m.Regex != "":
		if _, err := regexp.Compile(m.Regex); err != nil {
			return "", fmt.Errorf("cookie regex %q is not RE2: %w", m.Regex, err)
		}
		return cookiePairStart + "(?:" + m.Regex + ")" + cookiePairEnd, nil
	}
	return "", fmt.Errorf("cookie match has no exact, prefix or regex")
}

// checkStringMatch makes sure an api.StringMatch sets exactly one of
// exact, prefix, regex.
func checkStringMatch(m api.StringMatch) error {
	n := 0
	for _, s := range []string{m.Exact, m.Prefix, m.Regex} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("string match needs exactly one of exact, prefix, regex (got %d)", n)
	}
	return nil
}

func safeRegex(re string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: re} }

// valueHeaderMatcher compiles a value match on header name into HeaderMatcher's legacy fields
// exact_match, prefix_match and safe_regex_match, not string_match. The
// legacy fields are deprecated in Envoy's proto but still served by every
// Envoy v3 and every gRPC; string_match (Envoy 1.20, gRPC's gRFC A63, 2023)
// is unknown to older gRPC clients, which NACK the whole route table with
// "Invalid route header matcher specified" (C-core 1.51, Debian 12's
// python3-grpcio). Each api.StringMatch has an exact legacy equivalent; only
// string_match's ignore_case has none, and sluice never sets it: a
// case-insensitive match would have to use string_match (and raise the
// minimum client versions in docs/xds.md).
func valueHeaderMatcher(name string, m api.StringMatch) (*routev3.HeaderMatcher, error) {
	if err := checkStringMatch(m); err != nil {
		return nil, err
	}
	h := &routev3.HeaderMatcher{Name: name}
	switch {
	case m.Exact != "":
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_ExactMatch{ExactMatch: m.Exact}
	case m.Prefix != "":
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: m.Prefix}
	default:
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: safeRegex(m.Regex)}
	}
	return h, nil
}

// headerMatcher compiles one header match; a match on "cookie" becomes a
// cookie-pair regex (see cookieRegex). Header names are lowercased because
// gRPC metadata keys are, and gRPC never matches an uppercase name.
func headerMatcher(m api.HeaderMatch) (*routev3.HeaderMatcher, error) {
	name := strings.ToLower(strings.TrimSpace(m.HeaderName))
	if name == "" {
		return nil, fmt.Errorf("header match has no header name")
	}
	if m.IsCookie() {
		re, err := cookieRegex(m.HeaderValue)
		if err != nil {
			return nil, err
		}
		return &routev3.HeaderMatcher{
			Name:                 "cookie",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: safeRegex(re)},
		}, nil
	}
	h, err := valueHeaderMatcher(name, m.HeaderValue)
	if err != nil {
		return nil, fmt.Errorf("header %s: %w", name, err)
	}
	return h, nil
}

// mirrorMatch compiles one mirror RouteMatch: path, method (the :method
// pseudo-header) and headers, all of which must match.
func mirrorMatch(m api.RouteMatch) (*routev3.RouteMatch, error) {
	rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if p := m.Path; p != nil {
		switch {
		case p.Exact != "":
			rm.PathSpecifier = &routev3.RouteMatch_Path{Path: p.Exact}
		case p.Prefix != "":
			rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: p.Prefix}
		case p.Regex != "":
			rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: safeRegex(p.Regex)}
		default:
			return nil, fmt.Errorf("path match has no exact, prefix or regex")
		}
	}
	if m.Method != nil {
		h, err := headerMatcher(api.HeaderMatch{HeaderName: ":method", HeaderValue: *m.Method})
		if err != nil {
			return nil, fmt.Errorf("method: %w", err)
		}
		rm.Headers = append(rm.Headers, h)
	}
	for _, name := range sortedKeys(m.Headers) {
		h, err := headerMatcher(api.HeaderMatch{HeaderName: name, HeaderValue: m.Headers[name]})
		if err != nil {
			return nil, err
		}
		rm.Headers = append(rm.Headers, h)
	}
	return rm, nil
}
