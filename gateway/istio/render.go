package istio

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	netv1alpha3 "istio.io/api/networking/v1alpha3"
	netv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Options configures rendering.
type Options struct {
	// VersionLabel is the pod label that tells the two subsets apart; its
	// value is the version made label-safe (default "version").
	VersionLabel string
}

// Subset names in the DestinationRule.
const (
	SubsetStable = "stable"
	SubsetCanary = "canary"
)

// Objects builds the VirtualService and DestinationRule of one rollout,
// both named after the rollout, in its namespace.
func Objects(t api.Traffic, opts Options) (*netv1.VirtualService, *netv1.DestinationRule, error) {
	if opts.VersionLabel == "" {
		opts.VersionLabel = "version"
	}
	if t.Host == "" {
		return nil, nil, fmt.Errorf("rollout %s: host is empty", t.Rollout)
	}
	if t.Weights.Baseline > 0 {
		// Subsets select pods by version label, and a baseline runs the
		// stable version: the stable subset holds its pods, so its share
		// goes to that subset.
		t.Weights.Stable, t.Weights.Baseline = t.Weights.Stable+t.Weights.Baseline, 0
	}
	if t.Weights.Stable < 0 || t.Weights.Canary < 0 || t.Weights.Stable+t.Weights.Canary != 100 {
		return nil, nil, fmt.Errorf("rollout %s: weights %d/%d do not add up to 100", t.Rollout, t.Weights.Stable, t.Weights.Canary)
	}
	meta := metav1.ObjectMeta{Name: t.Rollout.Name, Namespace: t.Rollout.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice"}}
	canaryVersion := t.CanaryVersion
	if canaryVersion == "" {
		canaryVersion = t.StableVersion
	}

	dr := &netv1.DestinationRule{TypeMeta: metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "DestinationRule"}, ObjectMeta: meta}
	dr.Spec.Host = t.Host
	dr.Spec.Subsets = []*netv1alpha3.Subset{
		{Name: SubsetStable, Labels: map[string]string{opts.VersionLabel: labelValue(t.StableVersion)}},
		{Name: SubsetCanary, Labels: map[string]string{opts.VersionLabel: labelValue(canaryVersion)}},
	}

	vs := &netv1.VirtualService{TypeMeta: metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "VirtualService"}, ObjectMeta: *meta.DeepCopy()}
	vs.Spec.Hosts = []string{t.Host}
	canary := func() []*netv1alpha3.HTTPRouteDestination {
		return []*netv1alpha3.HTTPRouteDestination{{Destination: &netv1alpha3.Destination{Host: t.Host, Subset: SubsetCanary}, Weight: 100}}
	}
	for _, hr := range t.HeaderRoutes {
		if len(hr.Match) == 0 {
			continue
		}
		m, err := headerRouteMatch(hr)
		if err != nil {
			return nil, nil, fmt.Errorf("rollout %s: header route %q: %w", t.Rollout, hr.Name, err)
		}
		vs.Spec.Http = append(vs.Spec.Http, &netv1alpha3.HTTPRoute{Name: "header-" + hr.Name, Match: []*netv1alpha3.HTTPMatchRequest{m}, Route: canary()})
	}
	sticky := t.SessionAffinity != nil && t.Weights.Canary > 0
	if sticky {
		re, err := gateway.CookieRegex(api.StringMatch{Exact: t.SessionAffinity.CookieName + "=canary"})
		if err != nil {
			return nil, nil, fmt.Errorf("rollout %s: session affinity: %w", t.Rollout, err)
		}
		vs.Spec.Http = append(vs.Spec.Http, &netv1alpha3.HTTPRoute{
			Name:  "sticky",
			Match: []*netv1alpha3.HTTPMatchRequest{{Headers: map[string]*netv1alpha3.StringMatch{"cookie": regex(re)}}},
			Route: canary(),
		})
	}
	for _, mr := range t.MirrorRoutes {
		if len(mr.Match) == 0 {
			continue
		}
		r := &netv1alpha3.HTTPRoute{
			Name:             "mirror-" + mr.Name,
			Route:            weighted(t, sticky),
			Mirror:           &netv1alpha3.Destination{Host: t.Host, Subset: SubsetCanary},
			MirrorPercentage: &netv1alpha3.Percent{Value: float64(mr.Percentage)},
		}
		for _, rm := range mr.Match {
			m, err := mirrorMatch(rm)
			if err != nil {
				return nil, nil, fmt.Errorf("rollout %s: mirror route %q: %w", t.Rollout, mr.Name, err)
			}
			r.Match = append(r.Match, m)
		}
		vs.Spec.Http = append(vs.Spec.Http, r)
	}
	vs.Spec.Http = append(vs.Spec.Http, &netv1alpha3.HTTPRoute{Name: "default", Route: weighted(t, sticky)})
	return vs, dr, nil
}

// Render writes both objects as one multi-document YAML stream.
func Render(t api.Traffic, opts Options) ([]byte, error) {
	vs, dr, err := Objects(t, opts)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for i, obj := range []any{vs, dr} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", t.Rollout, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// weighted is the stable/canary split; both destinations stay listed (a
// weight of 0 is valid in Istio) so the canary subset stays warm.
func weighted(t api.Traffic, sticky bool) []*netv1alpha3.HTTPRouteDestination {
	c := &netv1alpha3.HTTPRouteDestination{Destination: &netv1alpha3.Destination{Host: t.Host, Subset: SubsetCanary}, Weight: t.Weights.Canary}
	if sticky {
		v := t.SessionAffinity.CookieName + "=canary"
		if t.SessionAffinity.MaxAge > 0 {
			v += fmt.Sprintf("; Max-Age=%d", t.SessionAffinity.MaxAge)
		}
		c.Headers = &netv1alpha3.Headers{Response: &netv1alpha3.Headers_HeaderOperations{Add: map[string]string{"set-cookie": v + "; Path=/; HttpOnly"}}}
	}
	return []*netv1alpha3.HTTPRouteDestination{
		{Destination: &netv1alpha3.Destination{Host: t.Host, Subset: SubsetStable}, Weight: t.Weights.Stable},
		c,
	}
}

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

// labelValue makes a version usable as a Kubernetes label value: at most 63
// characters of [A-Za-z0-9._-], starting and ending alphanumeric.
func labelValue(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s := string(b)
	if len(s) > 63 {
		s = s[len(s)-63:]
	}
	return strings.Trim(s, "-_.")
}
