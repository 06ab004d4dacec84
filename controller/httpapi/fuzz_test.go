package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler throws arbitrary methods, paths, queries, headers and bodies
// at the handler: it must never panic, must answer with one of the
// statuses the API uses, and must never run a command without the token.
func FuzzHandler(f *testing.F) {
	long := strings.Repeat("a", 8<<10)
	seeds := []struct{ method, target, auth, headers, body string }{
		{"GET", "/api/v1/rollouts", "", "", ""},
		{"GET", "/api/v1/rollouts/default/checkout", "", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/abort", "Bearer s3cr3t", "Content-Type: application/json", "{}"},
		{"POST", "/api/v1/rollouts/%2F/..%2F/promote?full=%zz", "Bearer", "", "x"},
		{"DELETE", "/api/v1/rollouts/default/checkout", "", "", ""},
		{"GET", "/api/v1/rollouts/default/checkout/events", "", "", ""},
		{"GET", "/metrics", "", "Accept: application/openmetrics-text; version=1.0.0", ""},
		// Writes without, or with a wrong, token.
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Bearer s3cr3t ", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Bearer s3cr3", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Basic czNjcjN0", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Bearer " + long, "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote", "Bearer\ts3cr3t", "", ""},
		// Hostile paths.
		{"POST", "/api/v1/rollouts/default/checkout/../checkout/promote", "", "", ""},
		{"POST", "/api/v1/rollouts/default//checkout/promote", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote/", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout%2Fpromote", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/PROMOTE", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/%00/%ff/abort", "Bearer s3cr3t", "", ""},
		{"GET", "/api/v1/rollouts/" + long + "/" + long, "", "", ""},
		{"GET", "//api/v1/rollouts", "", "", ""},
		{"GET", "/api/v1/rollouts/./default/../default/checkout", "", "", ""},
		{"GET", "/hook/github", "", "", ""},
		{"POST", "/hook/github", "", "X-Hub-Signature-256: sha256=00", "{}"},
		// Hostile queries.
		{"POST", "/api/v1/rollouts/shop/cart/promote?full=true&full=false", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/shop/cart/abort?full=1", "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/shop/cart/promote?full=" + long, "Bearer s3cr3t", "", ""},
		{"POST", "/api/v1/rollouts/shop/cart/promote?;full=true", "Bearer s3cr3t", "", ""},
		{"GET", "/api/v1/events?rollout=%zz", "", "", ""},
		{"GET", "/api/v1/events?rollout=a/b/c&rollout=", "", "Last-Event-ID: -1", ""},
		// Odd methods and headers.
		{"HEAD", "/api/v1/rollouts", "", "", ""},
		{"OPTIONS", "/api/v1/rollouts/default/checkout/promote", "", "", ""},
		{"TRACE", "/healthz", "", "", ""},
		{"CONNECT", "/api/v1/rollouts", "", "", ""},
		{"PROPFIND", "/readyz", "", "", ""},
		{"POST", "/api/v1/rollouts/shop/cart/pause", "Bearer s3cr3t", "Content-Length: 99999999999999999999\nTransfer-Encoding: chunked", "{}"},
		{"POST", "/api/v1/rollouts/shop/cart/pause", "Bearer s3cr3t", "X-Forwarded-For: 10.0.0.1\nAuthorization: Bearer s3cr3t", strings.Repeat("{", 100)},
		{"POST", "/api/v1/rollouts/shop/cart/pause", "Bearer s3cr3t", "", strings.Repeat("x", 65)},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.auth, s.headers, s.body)
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 413: true, 301: true, 302: true, 307: true, 308: true, 503: true}
	f.Fuzz(func(t *testing.T, method, target, auth, headers, body string) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") {
			return // not an HTTP request the server would parse
		}
		req, err := http.NewRequest(method, "http://localhost"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		for _, line := range strings.Split(headers, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		req.Header.Set("Authorization", auth)
		// Seeds without headers are sent as the client commands send them,
		// so that the token check behind the cross-site guard is fuzzed too.
		if headers == "" {
			req.Header.Set(ClientHeader, "fuzz")
		}
		be := newMemBackend(designStatus(), healthy("shop", "cart"))
		hook := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
		h, err := New(Options{Backend: be, Token: "s3cr3t", MaxBodyBytes: 64, Hook: hook, Limits: Limits{MaxEventStreams: 1}})
		if err != nil {
			t.Fatal(err)
		}
		h.CloseStreams() // an event stream then ends at once instead of never
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Errorf("%s %s answered %d: %s", method, target, rec.Code, rec.Body)
		}
		if loc := rec.Header().Get("Location"); rec.Code == http.StatusFound && loc != "/ui/" {
			t.Errorf("%s %s redirected to %q; the only 302 is / to the dashboard", method, target, loc)
		}
		if cmds := be.lastCommands(); len(cmds) > 0 && !bearerIs(auth, "s3cr3t") {
			t.Errorf("%s %s with Authorization %q ran %v without the token", method, target, auth, cmds)
		}
		if cmds := be.lastCommands(); len(cmds) > 0 && req.Header.Get(ClientHeader) == "" && !jsonBody(req) {
			t.Errorf("%s %s with headers %q ran %v: a request an HTML form can send must not act", method, target, headers, cmds)
		}
	})
}

// bearerIs is the test's own reading of the auth rule: "Bearer <token>",
// scheme in any case, surrounding whitespace of the token ignored.
func bearerIs(auth, token string) bool {
	scheme, tok, ok := strings.Cut(auth, " ")
	return ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) == token
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, r := range m {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}
