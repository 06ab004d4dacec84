package probe

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// runningBackend is a Backend serving on loopback ports until the test ends.
type runningBackend struct {
	*Backend
	grpcAddr, httpAddr string
}

func startBackend(t *testing.T, opts BackendOptions) *runningBackend {
	t.Helper()
	b, err := NewBackend(opts)
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, gl, hl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &runningBackend{Backend: b, grpcAddr: gl.Addr().String(), httpAddr: hl.Addr().String()}
}

func dialDirect(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// TestBackend calls a real backend over gRPC and checks its answers, the
// spread of injected failures, /stats and /metrics.
func TestBackend(t *testing.T) {
	tests := []struct {
		name       string
		rate       float64
		calls      int
		wantFailed int
	}{
		{"healthy", 0, 50, 0},
		{"fifth fails", 0.2, 100, 20},
		{"all fail", 1, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, BackendOptions{Version: "demo/app:v2", FailureRate: tt.rate})
			cc := dialDirect(t, b.grpcAddr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			failed, run := 0, 0 // longest run of consecutive failures
			longest := 0
			for range tt.calls {
				v, err := Call(ctx, cc, "x-canary", "always")
				if v != "demo/app:v2" {
					t.Fatalf("version = %q (err %v), want demo/app:v2", v, err)
				}
				if err != nil {
					if status.Code(err) != codes.Unavailable {
						t.Fatalf("error code = %v, want Unavailable", status.Code(err))
					}
					failed++
					run++
					longest = max(longest, run)
				} else {
					run = 0
				}
			}
			if failed != tt.wantFailed {
				t.Fatalf("failed %d of %d, want %d", failed, tt.calls, tt.wantFailed)
			}
			if tt.rate > 0 && tt.rate < 0.5 && longest > 1 {
				t.Fatalf("failures clumped: %d in a row", longest)
			}

			var st Stats
			if err := json.Unmarshal([]byte(httpGet(t, "http://"+b.httpAddr+"/stats")), &st); err != nil {
				t.Fatal(err)
			}
			if st.Requests != tt.calls || st.Errors != tt.wantFailed || st.TotalRequests != int64(tt.calls) {
				t.Fatalf("stats = %+v", st)
			}
			wantRate := float64(tt.wantFailed) / float64(tt.calls)
			if st.ErrorRate == nil || *st.ErrorRate != wantRate || *st.SuccessRate != 1-wantRate {
				t.Fatalf("stats rates = %v / %v, want error rate %v", st.ErrorRate, st.SuccessRate, wantRate)
			}

			metrics := httpGet(t, "http://"+b.httpAddr+"/metrics")
			for _, want := range []string{
				`requests_total{code="OK",version="demo/app:v2"} ` + itoa(tt.calls-tt.wantFailed),
				`requests_total{code="Unavailable",version="demo/app:v2"} ` + itoa(tt.wantFailed),
				`request_duration_seconds_count{version="demo/app:v2"} ` + itoa(tt.calls),
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("/metrics lacks %q:\n%s", want, metrics)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestBackendStatsEmpty: with no request in the window the rates are
// absent, so a jsonPath on them finds nothing (Inconclusive), not 0.
func TestBackendStatsEmpty(t *testing.T) {
	b := startBackend(t, BackendOptions{Version: "v1"})
	body := httpGet(t, "http://"+b.httpAddr+"/stats")
	if strings.Contains(body, "Rate") {
		t.Fatalf("rates present with no requests: %s", body)
	}
}

func TestBackendOptions(t *testing.T) {
	tests := []struct {
		name string
		opts BackendOptions
	}{
		{"no version", BackendOptions{}},
		{"negative rate", BackendOptions{Version: "v", FailureRate: -0.1}},
		{"rate above one", BackendOptions{Version: "v", FailureRate: 1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewBackend(tt.opts); err == nil {
				t.Fatal("NewBackend accepted invalid options")
			}
		})
	}
}
