package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler throws arbitrary methods, paths, queries, headers and bodies
// at the handler: it must never panic and must answer with one of the
// statuses the API uses.
func FuzzHandler(f *testing.F) {
	seeds := []struct{ method, target, auth, body string }{
		{"GET", "/api/v1/rollouts", "", ""},
		{"GET", "/api/v1/rollouts/default/checkout", "", ""},
		{"POST", "/api/v1/rollouts/default/checkout/promote?full=true", "Bearer s3cr3t", ""},
		{"POST", "/api/v1/rollouts/default/checkout/abort", "Bearer s3cr3t", "{}"},
		{"POST", "/api/v1/rollouts/%2F/..%2F/promote?full=%zz", "Bearer", "x"},
		{"DELETE", "/api/v1/rollouts/default/checkout", "", ""},
		{"GET", "/api/v1/rollouts/default/checkout/events", "", ""},
		{"GET", "/metrics", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.auth, s.body)
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 404: true, 405: true, 409: true, 413: true, 301: true, 307: true, 308: true}
	f.Fuzz(func(t *testing.T, method, target, auth, body string) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "/api/v1/events") {
			return // not an HTTP request the server would parse; the stream never ends
		}
		req, err := http.NewRequest(method, "http://sluice"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", auth)
		be := newMemBackend(designStatus(), healthy("shop", "cart"))
		h, err := New(Options{Backend: be, Token: "s3cr3t", MaxBodyBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Errorf("%s %s answered %d: %s", method, target, rec.Code, rec.Body)
		}
	})
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
