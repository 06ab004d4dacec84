package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestIdleConnectionsUnderFileLimit is finding K2: under a limit of 200
// file descriptors, 250 idle keep-alive connections to the HTTP API broke
// /healthz and xDS, and the git cache, unable to open its files, was
// judged corrupt and re-cloned. Now the API keeps at most half the
// descriptors (--http-max-connections, lowered to 100 here), an idle
// connection makes room for /healthz, xDS still answers and the next push
// is applied from the same cache.
func TestIdleConnectionsUnderFileLimit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	repo := newGitRepo(t)
	spec := rolloutSpec{Name: "fl", Host: "fl.e2e", Version: "shop/fl:v1",
		Endpoints: map[string]string{"shop/fl:v1": "127.0.0.1:9", "shop/fl:v2": "127.0.0.1:9"},
		Steps:     "- setWeight: 50\n- pause: {}\n"}
	repo.push("v1", map[string]string{"rollouts/fl.yaml": spec.yaml()})
	d := startDaemonUnder(t, repo, []string{"prlimit", "--nofile=200:200"})
	d.waitStatus("fl", 60*time.Second, "v1 healthy", func(s httpapi.RolloutStatus) bool { return s.StableVersion == "shop/fl:v1" })

	start := time.Now()
	var idle []net.Conn
	for range 250 {
		c, err := net.DialTimeout("tcp", d.httpAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", d.httpAddr)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
		}
		idle = append(idle, c)
	}
	t.Logf("250 keep-alive connections opened in %s", time.Since(start))

	hc := &http.Client{Timeout: 3 * time.Second}
	start = time.Now()
	resp, err := hc.Get(d.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz beside 250 idle connections: %v %v", resp, err)
	}
	resp.Body.Close()
	t.Logf("/healthz answered in %s", time.Since(start))

	if routes := routeTable(t, d.xdsAddr, spec.Host); len(routes) == 0 {
		t.Fatal("xDS served no routes")
	}

	spec.Version = "shop/fl:v2"
	repo.push("v2", map[string]string{"rollouts/fl.yaml": spec.yaml()})
	d.waitStatus("fl", 60*time.Second, "v2 canary", func(s httpapi.RolloutStatus) bool { return s.CanaryVersion == "shop/fl:v2" })
	for _, bad := range []string{"git cache is corrupt", "too many open files"} {
		if strings.Contains(d.log.String(), bad) {
			t.Errorf("log says %q:\n%s", bad, testkit.LastLines(d.log.String(), 40))
		}
	}
	if got := d.metric(`sluice_http_refused_total{reason="connection-evicted"}`); got < 150 {
		t.Errorf("connection-evicted = %v, want at least 150 of the 250", got)
	}
}
