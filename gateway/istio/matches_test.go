package istio

import (
	"regexp"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// TestStringMatchNeedsExactlyOne: a match with two matchers (or none) is
// refused, not silently narrowed to one of them.
func TestStringMatchNeedsExactlyOne(t *testing.T) {
	for _, m := range []api.StringMatch{{}, {Exact: "a", Regex: "b"}, {Exact: "a", Prefix: "b"}, {Prefix: "a", Regex: "b"}} {
		if _, err := stringMatch(m); err == nil {
			t.Errorf("stringMatch(%+v) accepted", m)
		}
	}
	for _, m := range []api.StringMatch{{Exact: "a"}, {Prefix: "/api/"}, {Regex: "v[0-9]+"}} {
		if _, err := stringMatch(m); err != nil {
			t.Errorf("stringMatch(%+v): %v", m, err)
		}
	}
}

// TestCookieMatchIsAnchoredPair: a cookie match becomes a regex on the
// Cookie header that matches the pair itself and not a longer cookie
// name or value, as the xDS gateway's does.
func TestCookieMatchIsAnchoredPair(t *testing.T) {
	name, sm, err := headerMatch(api.HeaderMatch{HeaderName: "Cookie", HeaderValue: api.StringMatch{Exact: "beta=yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if name != "cookie" || sm.GetRegex() == "" {
		t.Fatalf("headerMatch = %q, %v; want a regex on cookie", name, sm)
	}
	re := regexp.MustCompile("^(?:" + sm.GetRegex() + ")$")
	for header, want := range map[string]bool{
		"beta=yes":              true,
		"a=1; beta=yes":         true,
		"beta=yes; b=2":         true,
		"xbeta=yes":             false,
		"beta=yesno":            false,
		"a=beta=yes":            false,
		"session=1; beta=maybe": false,
	} {
		if got := re.MatchString(header); got != want {
			t.Errorf("Cookie: %q matched %v, want %v (regex %s)", header, got, want, sm.GetRegex())
		}
	}
}
