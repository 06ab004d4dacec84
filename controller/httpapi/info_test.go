package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInfoAndDashboard: /api/v1/info tells a client (the dashboard)
// whether commands need the token; /ui/ serves the page and / leads there.
func TestInfoAndDashboard(t *testing.T) {
	for _, tt := range []struct {
		token string
		want  bool
	}{{"", false}, {"s3cret", true}} {
		t.Run("token="+tt.token, func(t *testing.T) {
			h, err := New(Options{Backend: newMemBackend(), Token: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/info", nil))
			var info Info
			if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("info: %d %s (%v)", rec.Code, rec.Body, err)
			}
			if info.TokenRequired != tt.want {
				t.Errorf("tokenRequired = %v, want %v", info.TokenRequired, tt.want)
			}
		})
	}
	h, _ := New(Options{Backend: newMemBackend()})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/", nil))
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/ui/" {
		t.Errorf("GET / = %d to %q, want 302 to /ui/", rec.Code, rec.Header().Get("Location"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/ui/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "app.js") {
		t.Errorf("GET /ui/ = %d %.100s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/nothing", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing = %d, want 404 (only / itself redirects)", rec.Code)
	}
}
