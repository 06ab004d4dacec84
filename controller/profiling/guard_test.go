package profiling

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCmdlineHidesSecrets is finding N2's second half: pprof's
// /debug/pprof/cmdline showed the command line as given, so a Slack URL
// or a webhook's user:password@ passed as flags could be read by whoever
// reached pprof. It is served with its values redacted.
func TestCmdlineHidesSecrets(t *testing.T) {
	secrets := []string{"https://hooks.slack.com/services/T0/B0/XXXX", "https://alice:pa55w0rd@hooks.example/x", "http://am:9093"}
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	os.Args = []string{"/usr/bin/sluice", "run", "--alert-slack", secrets[0], "--alert-webhook=" + secrets[1], "-v", "--alertmanager-url", secrets[2], "--kubernetes"}

	srv := httptest.NewServer(Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, s := range append(secrets, "pa55w0rd", "XXXX") {
		if strings.Contains(string(body), s) {
			t.Errorf("cmdline shows %q: %q", s, body)
		}
	}
	want := []string{"/usr/bin/sluice", "run", "--alert-slack", "<redacted>", "--alert-webhook=<redacted>", "-v", "--alertmanager-url", "<redacted>", "--kubernetes"}
	if got := strings.Split(string(body), "\x00"); res.StatusCode != 200 || !slices.Equal(got, want) {
		t.Errorf("cmdline = %d %q, want %q", res.StatusCode, got, want)
	}
}

// TestForeignHostAndCrossSiteRefused is finding N2 on pprof: a page on
// evil.example rebound to 127.0.0.1 was served the profiles. A foreign
// Host is answered 421, and a request a page on another site sends
// (Sec-Fetch-Site), reads included, 403.
func TestForeignHostAndCrossSiteRefused(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	tests := []struct {
		name, host, site string
		want             int
	}{
		{"rebound name", "evil.example:6060", "", http.StatusMisdirectedRequest},
		{"rebound name, same-origin to itself", "evil.example:6060", "same-origin", http.StatusMisdirectedRequest},
		{"an image on another site", "127.0.0.1:6060", "cross-site", http.StatusForbidden},
		{"another origin of the site", "localhost:6060", "same-site", http.StatusForbidden},
		{"go tool pprof, curl", "127.0.0.1:6060", "", http.StatusOK},
		{"typed into the address bar", "localhost:6060", "none", http.StatusOK},
		{"ipv6 loopback", "[::1]:6060", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/debug/pprof/heap", nil)
			req.Host = tt.host
			if tt.site != "" {
				req.Header.Set("Sec-Fetch-Site", tt.site)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("Host %s, Sec-Fetch-Site %q: %d %.100q, want %d", tt.host, tt.site, res.StatusCode, body, tt.want)
			}
		})
	}
}
