package istio

import (
	"fmt"
	"strings"

	netv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
)

// The match translation of the routes sluice adds to a VirtualService:
// cookie matches compile to the same anchored cookie-pair regex as the
// xDS gateway's (gateway.CookieRegex).

// headerRouteMatch is one header route's match: all of its headers.
func headerRouteMatch(hr api.HeaderRoute) (*netv1alpha3.HTTPMatchRequest, error) {
	m := &netv1alpha3.HTTPMatchRequest{Headers: map[string]*netv1alpha3.StringMatch{}}
	for _, h := range hr.Match {
		name, sm, err := headerMatch(h)
		if err != nil {
			return nil, err
		}
		m.Headers[name] = sm
	}
	return m, nil
}

func headerMatch(h api.HeaderMatch) (string, *netv1alpha3.StringMatch, error) {
	name := strings.ToLower(h.HeaderName)
	if h.IsCookie() {
		re, err := gateway.CookieRegex(h.HeaderValue)
		if err != nil {
			return "", nil, err
		}
		return "cookie", regex(re), nil
	}
	sm, err := stringMatch(h.HeaderValue)
	return name, sm, err
}

func mirrorMatch(rm api.RouteMatch) (*netv1alpha3.HTTPMatchRequest, error) {
	m := &netv1alpha3.HTTPMatchRequest{}
	var err error
	if rm.Path != nil {
		if m.Uri, err = stringMatch(*rm.Path); err != nil {
			return nil, fmt.Errorf("path: %w", err)
		}
	}
	if rm.Method != nil {
		if m.Method, err = stringMatch(*rm.Method); err != nil {
			return nil, fmt.Errorf("method: %w", err)
		}
	}
	for name, v := range rm.Headers {
		if m.Headers == nil {
			m.Headers = map[string]*netv1alpha3.StringMatch{}
		}
		n, sm, err := headerMatch(api.HeaderMatch{HeaderName: name, HeaderValue: v})
		if err != nil {
			return nil, err
		}
		m.Headers[n] = sm
	}
	return m, nil
}

func stringMatch(m api.StringMatch) (*netv1alpha3.StringMatch, error) {
	switch {
	case m.Exact != "" && m.Prefix == "" && m.Regex == "":
		return &netv1alpha3.StringMatch{MatchType: &netv1alpha3.StringMatch_Exact{Exact: m.Exact}}, nil
	case m.Prefix != "" && m.Exact == "" && m.Regex == "":
		return &netv1alpha3.StringMatch{MatchType: &netv1alpha3.StringMatch_Prefix{Prefix: m.Prefix}}, nil
	case m.Regex != "" && m.Exact == "" && m.Prefix == "":
		return regex(m.Regex), nil
	}
	return nil, fmt.Errorf("string match needs exactly one of exact, prefix, regex")
}

func regex(re string) *netv1alpha3.StringMatch {
	return &netv1alpha3.StringMatch{MatchType: &netv1alpha3.StringMatch_Regex{Regex: re}}
}
