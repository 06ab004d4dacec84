package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// collector is a real OpenTelemetry Collector (hack/otelcol: the OTLP
// receiver and the file exporter) receiving on a free loopback port and
// writing every span it gets to a JSON-lines file.
type collector struct {
	httpEndpoint string // http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT
	out          string // the file exporter's output
}

// startCollector builds the collector once (hack/otelcol.sh caches it)
// and runs it until the test ends.
func startCollector(t *testing.T) *collector {
	t.Helper()
	build := exec.Command("bash", "../hack/otelcol.sh")
	var stderr bytes.Buffer
	build.Stderr = &stderr
	binOut, err := build.Output()
	if err != nil {
		t.Fatalf("build the collector (hack/otelcol.sh): %v\n%s", err, stderr.String())
	}
	bin := strings.TrimSpace(string(binOut))
	dir := t.TempDir()
	addr := testkit.FreeLoopbackAddr(t)
	c := &collector{httpEndpoint: "http://" + addr, out: filepath.Join(dir, "traces.json")}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
exporters:
  file:
    path: %q
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, addr, c.out)
	cfg := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	log := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("collector log (last 30 lines):\n%s", testkit.LastLines(log.String(), 30))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return c
		}
		select {
		case <-exited:
			t.Fatalf("collector exited:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector not listening on %s within 30s:\n%s", addr, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// span is one span as the file exporter writes it (OTLP JSON).
type span struct {
	TraceID      string            `json:"traceId"`
	SpanID       string            `json:"spanId"`
	ParentSpanID string            `json:"parentSpanId"`
	Name         string            `json:"name"`
	Start        string            `json:"startTimeUnixNano"`
	End          string            `json:"endTimeUnixNano"`
	Attributes   []otlpAttribute   `json:"attributes"`
	Status       map[string]any    `json:"status"`
	attrs        map[string]string // Attributes as text
}

type otlpAttribute struct {
	Key   string `json:"key"`
	Value struct {
		String *string `json:"stringValue"`
		Int    *string `json:"intValue"` // OTLP JSON writes int64 as a string
		Bool   *bool   `json:"boolValue"`
	} `json:"value"`
}

// spans reads every span the collector has written so far.
func (c *collector) spans(t *testing.T) []*span {
	t.Helper()
	f, err := os.Open(c.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*span
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []*span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			continue // a line being written
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.attrs = map[string]string{}
					for _, a := range s.Attributes {
						switch {
						case a.Value.String != nil:
							s.attrs[a.Key] = *a.Value.String
						case a.Value.Int != nil:
							s.attrs[a.Key] = *a.Value.Int
						case a.Value.Bool != nil:
							s.attrs[a.Key] = fmt.Sprint(*a.Value.Bool)
						}
					}
					out = append(out, s)
				}
			}
		}
	}
	return out
}
