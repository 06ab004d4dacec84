package alert_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/internal/testkit"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://hooks.slack.com/services/T0/B0/XXX", "https://hooks.slack.com/…"},
		{"https://user:pw@host/x?token=1", "https://host/…"},
		{"https://TOKEN@host:8443", "https://host:8443"},
		{"http://alertmanager:9093/", "http://alertmanager:9093"},
		{"http://alertmanager:9093?k=v", "http://alertmanager:9093/…"},
		{"not a url", "(unparsable URL)"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := alert.RedactURL(tc.in); got != tc.want {
				t.Fatalf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// lockedBuffer is a log destination shared by the dispatcher's workers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// secretWords are planted in sink URLs; none may reach a log line.
var secretWords = []string{"T0SECRET", "B0SECRET", "XXXSECRET", "hookuser", "hookpw", "TOKSECRET", "amuser", "ampw", "AMSECRET"}

// TestFailedDeliveryLogsNoSecrets: every failing sink, whether it answers
// 500 or refuses the connection (net/http then puts the full URL into the
// error), is logged by kind and host only.
func TestFailedDeliveryLogsNoSecrets(t *testing.T) {
	failing := newRecorder(t, -1) // answers 500 forever
	closed := closedAddr(t)
	tests := []struct {
		kind alert.Kind
		url  string
		want string
	}{
		{alert.KindSlack, failing.srv.URL + "/services/T0SECRET/B0SECRET/XXXSECRET", "sink=slack:" + failing.srv.URL + "/…"},
		{alert.KindWebhook, "http://hookuser:hookpw@" + closed + "/hook?token=TOKSECRET", "sink=webhook:http://" + closed + "/…"},
		{alert.KindAlertmanager, "http://amuser:ampw@" + closed + "/am?k=AMSECRET", "sink=alertmanager:http://" + closed + "/…"},
	}
	var logs lockedBuffer
	var sinks []alert.Sink
	for _, tc := range tests {
		s, err := alert.NewSink(alert.SinkOptions{Kind: tc.kind, URL: tc.url})
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	d, err := alert.New(alert.Options{
		Outbox: openStore(t, t.TempDir()), Sinks: sinks, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := d.Enqueue(aborted("a")); err != nil {
		t.Fatal(err)
	}
	// Each sink retries every 10-20ms: wait for a few failures of each.
	eventually(t, "failed deliveries logged", func() bool {
		return strings.Count(logs.String(), "alert delivery failed") >= 3*len(tests)
	})
	cancel()
	<-done
	out := logs.String()
	for _, w := range secretWords {
		if strings.Contains(out, w) {
			t.Errorf("log contains %q:\n%s", w, out)
		}
	}
	for _, tc := range tests {
		if !strings.Contains(out, tc.want) {
			t.Errorf("log does not name the %s sink as %q:\n%s", tc.kind, tc.want, out)
		}
	}
}

func TestSinkURLErrorsAreRedacted(t *testing.T) {
	tests := []struct {
		name string
		url  string
	}{
		{"not http", "ftp://hookuser:hookpw@host/hook?token=TOKSECRET"},
		{"unparsable", "http://hookuser:hookpw@host/%zz?token=TOKSECRET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: tc.url})
			if err == nil {
				t.Fatal("NewSink accepted a bad URL")
			}
			for _, w := range secretWords {
				if strings.Contains(err.Error(), w) {
					t.Fatalf("error %q contains %q", err, w)
				}
			}
		})
	}
}

// TestSinkTimeout: a sink that accepts and never answers fails each
// attempt after its timeout, is retried with back-off on new
// connections, and does not hold up another sink.
func TestSinkTimeout(t *testing.T) {
	addr, accepted := testkit.StallingListener(t)
	stalled, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: "http://" + addr + "/hook", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	good := newRecorder(t, 0)
	reg := prometheus.NewRegistry()
	var logs lockedBuffer
	d, err := alert.New(alert.Options{
		Outbox: openStore(t, t.TempDir()), Sinks: []alert.Sink{stalled, webhook(t, good.srv.URL)},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := d.Enqueue(aborted("a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the good sink to get the alert", func() bool { _, s := good.counts(); return len(s) == 1 })
	eventually(t, "three timed-out attempts on three connections", func() bool {
		return timeouts(t, reg, "webhook:http://"+addr+"/…") >= 3 && accepted() >= 3
	})
	if !strings.Contains(logs.String(), "no answer within 100ms (--alert-timeout)") {
		t.Errorf("log does not name the timeout:\n%s", logs.String())
	}
}

// timeouts reads sluice_alert_delivery_failures_total{sink,reason="timeout"}.
func timeouts(t *testing.T, reg *prometheus.Registry, sink string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sluice_alert_delivery_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["sink"] == sink && labels["reason"] == "timeout" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
