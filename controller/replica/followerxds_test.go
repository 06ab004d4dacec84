package replica

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestFollowerXDSBindsBeforeSync: a follower accepts xDS connections while
// it is still reading the cluster, so that a client dialing it early waits
// for its first routes instead of being refused. A refused gRPC client
// fails its queued wait-for-ready calls with `unknown cluster selected for
// RPC: ""` once the routes arrive (issue 13; see startFollowerXDS).
func TestFollowerXDSBindsBeforeSync(t *testing.T) {
	// An apiserver that never answers: the follower's informers cannot
	// sync, so it stays in its start-up for as long as the test looks.
	release := make(chan struct{})
	apiserver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer apiserver.Close()
	defer close(release)

	addr := testkit.FreeLoopbackAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() {
		f, err := startFollowerXDS(ctx, daemon.Options{XDSAddr: addr}, &rest.Config{Host: apiserver.URL}, "sluice-0", slog.New(slog.DiscardHandler),
			prometheus.NewRegistry(), newFollowerAPI(func() string { return "" }))
		if f != nil {
			f.stop()
		}
		started <- err
	}()

	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-started:
			t.Fatalf("the follower's start ended before the cluster answered (err %v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's xDS address %s still refuses connections while it reads the cluster: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a port: there is nothing to wait on
	}

	cancel()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower's start did not end after its context was cancelled")
	}
}
