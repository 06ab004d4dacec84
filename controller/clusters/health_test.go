package clusters

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// changeLog keeps OnChange's calls.
type changeLog struct {
	mu      sync.Mutex
	changes []string
}

func (l *changeLog) add(name string, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, fmt.Sprintf("%s down=%v", name, down))
}

func (l *changeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.changes)
}

// silentServer accepts connections and never answers: an apiserver behind
// a partition that drops packets (a cut CutProxy refuses at once, the
// other kind).
func silentServer(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-accepted
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + lis.Addr().String()
}

func TestHealth(t *testing.T) {
	c := kubetest.Shared(t)
	proxy := kubetest.NewCutProxy(t, strings.TrimPrefix(c.Config.Host, "https://"))
	at := func(server string) *rest.Config {
		cfg := rest.CopyConfig(c.Config)
		cfg.Host = server
		return cfg
	}
	clusters := []Cluster{
		{Name: "home", Home: true, Config: c.Config},
		{Name: "eu-2", Config: at("https://" + proxy.Addr())},
		{Name: "silent", Config: at(silentServer(t))},
	}
	// The clock moves a second per reading, in another zone than UTC, so
	// that "since" shows which probe it came from and the status's zone.
	start := time.Date(2026, 12, 5, 13, 3, 4, 0, time.FixedZone("CET", 3600))
	var ticks atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Second) }
	var log changeLog
	h, err := NewHealth(clusters, HealthOptions{Interval: 50 * time.Millisecond, Timeout: 500 * time.Millisecond, Now: now, OnChange: log.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	down := func(name string) func() (bool, string) {
		return func() (bool, string) {
			_, reason, down := h.Unreachable(name)
			return down, fmt.Sprintf("down=%v %q; changes %q", down, reason, log.get())
		}
	}
	up := func(name string) func() (bool, string) {
		return func() (bool, string) { ok, state := down(name)(); return !ok, state }
	}
	statusRE := regexp.MustCompile(`^cluster (\S+) unreachable since (\d\d:\d\d:\d\d): (.+)$`)
	// checkStatus: the reason says one of wantReasons (a probe in flight
	// when the proxy is cut fails with EOF, and may time out under load,
	// before the next one is refused).
	checkStatus := func(name string, wantReasons ...string) time.Time {
		t.Helper()
		since, reason, _ := h.Unreachable(name)
		if !slices.ContainsFunc(wantReasons, func(w string) bool { return strings.Contains(reason, w) }) {
			t.Errorf("%s: reason %q says none of %q", name, reason, wantReasons)
		}
		status := h.Reason(name)
		t.Log(status)
		m := statusRE.FindStringSubmatch(status)
		if m == nil || m[1] != name || m[2] != since.UTC().Format("15:04:05") || m[3] != reason {
			t.Errorf("%s: status %q, want \"cluster %s unreachable since %s: %s\"", name, status, name, since.UTC().Format("15:04:05"), reason)
		}
		if !strings.HasPrefix(m[2], "12:03:") {
			t.Errorf("%s: since %s is not in UTC (the clock reads 13:03:xx CET)", name, m[2])
		}
		return since
	}

	t.Run("a silent apiserver is down once a probe times out", func(t *testing.T) {
		kubetest.Eventually(t, 10*time.Second, "silent down", down("silent"))
		checkStatus("silent", "/readyz did not answer within 500ms")
	})

	t.Run("a cut apiserver is down, with the first failure's time", func(t *testing.T) {
		kubetest.Eventually(t, 10*time.Second, "home and eu-2 probed", func() (bool, string) {
			return ticks.Load() > 10, fmt.Sprintf("%d clock readings", ticks.Load())
		})
		if h.Reason("eu-2") != "" || h.Reason("home") != "" {
			t.Fatalf("down before the cut: eu-2 %q, home %q", h.Reason("eu-2"), h.Reason("home"))
		}
		proxy.Cut()
		kubetest.Eventually(t, 10*time.Second, "eu-2 down", down("eu-2"))
		since := checkStatus("eu-2", "connection refused", "EOF")
		seen := ticks.Load()
		kubetest.Eventually(t, 10*time.Second, "more probes", func() (bool, string) {
			return ticks.Load() > seen+10, fmt.Sprintf("%d clock readings", ticks.Load())
		})
		if later, _, down := h.Unreachable("eu-2"); !down || !later.Equal(since) {
			t.Errorf("after more failed probes: down=%v since %v, want since %v (the first failure)", down, later, since)
		}
	})

	t.Run("a restored apiserver is up again", func(t *testing.T) {
		proxy.Restore(t)
		kubetest.Eventually(t, 10*time.Second, "eu-2 up", up("eu-2"))
		if s := h.Reason("eu-2"); s != "" {
			t.Errorf("status of a reachable cluster: %q", s)
		}
	})

	t.Run("changes and the others", func(t *testing.T) {
		if _, _, down := h.Unreachable("home"); down {
			t.Error("home down")
		}
		if !slices.Contains(log.get(), "silent down=true") {
			t.Errorf("changes %q: no silent down=true", log.get())
		}
		var eu2 []string
		for _, ch := range log.get() {
			if strings.HasPrefix(ch, "home ") {
				t.Errorf("home changed: %q", ch)
			}
			if strings.HasPrefix(ch, "eu-2 ") {
				eu2 = append(eu2, ch)
			}
		}
		if want := []string{"eu-2 down=true", "eu-2 down=false"}; !slices.Equal(eu2, want) {
			t.Errorf("eu-2's changes %q, want %q", eu2, want)
		}
		if _, reason, down := h.Unreachable("nowhere"); !down || reason != "not a cluster sluice manages" {
			t.Errorf("unknown cluster: down=%v %q", down, reason)
		}
	})
}
