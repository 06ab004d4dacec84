package hostcheck

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAllowed(t *testing.T) {
	l, err := New("--api-allowed-hosts", []string{"sluice.sluice-system.svc", "Sluice.Example.com.", "*.internal.example"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		want bool
	}{
		{"localhost:8080", true},
		{"LOCALHOST", true},
		{"127.0.0.1:8080", true},
		{"[::1]:8080", true},
		{"10.244.1.7:8080", true}, // a pod IP: kubelet's probes
		{"", true},
		{"sluice.sluice-system.svc:8080", true},
		{"sluice.example.com", true},
		{"sluice.example.com.:443", true},
		{"a.internal.example", true},
		{"a.b.internal.example:1", true},
		{"internal.example", false},
		{"evil.example:8080", false},
		{"evil.example", false},
		{"localhost.evil.example", false},
		{"127.0.0.1.nip.io:8080", false},
		{"sluice.example.com.evil.example", false},
		{"xsluice.example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := l.Allowed(tt.host); got != tt.want {
				t.Errorf("Allowed(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
	var zero *List
	if !zero.Allowed("127.0.0.1:1") || zero.Allowed("evil.example") {
		t.Error("a nil List must allow loopback and IPs only")
	}
}

func TestNewRefusesWhatIsNotAName(t *testing.T) {
	for _, bad := range []string{"http://sluice.example.com", "sluice.example.com:8080", "sluice/x", "", "*.", "a..b", "-a.b", "*"} {
		t.Run(bad, func(t *testing.T) {
			_, err := New("--api-allowed-hosts", []string{bad})
			if err == nil || !strings.Contains(err.Error(), "--api-allowed-hosts") {
				t.Fatalf("New(%q) = %v, want an error naming the flag", bad, err)
			}
		})
	}
}

// TestHandler: a foreign Host is answered 421 with a body that says why,
// before the handler runs; exempt paths pass.
func TestHandler(t *testing.T) {
	l, _ := New("x", nil)
	ran := 0
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ }), "--api-allowed-hosts",
		func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range []struct {
		host, path string
		want       int
	}{
		{"evil.example:8080", "/api/v1/rollouts", http.StatusMisdirectedRequest},
		{"evil.example:8080", "/healthz", http.StatusOK},
		{"localhost:8080", "/api/v1/rollouts", http.StatusOK},
	} {
		before := ran
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		req.Host = tt.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %s %s = %d %s, want %d", tt.host, tt.path, resp.StatusCode, body, tt.want)
		}
		if tt.want == http.StatusMisdirectedRequest {
			if ran != before {
				t.Errorf("the handler ran for Host %s", tt.host)
			}
			if !strings.Contains(string(body), "--api-allowed-hosts") || !strings.Contains(string(body), "evil.example") {
				t.Errorf("421 body %q does not say which host and how to allow it", body)
			}
		}
	}
}
