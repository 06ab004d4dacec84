package ackboard

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, 0) }

const (
	heartbeat = 200 * time.Millisecond
	expiry    = 2 * time.Second
)

// follower starts a Writer for identity until the returned stop is called.
func follower(t *testing.T, c *kubetest.Cluster, ns, identity string) (*Writer, func()) {
	t.Helper()
	w, err := NewWriter(WriterOptions{Client: c.Client, Namespace: ns, Identity: identity, Heartbeat: heartbeat, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return w, stop
}

func board(t *testing.T, c *kubetest.Cluster, ns, identity string) *Board {
	t.Helper()
	b, err := NewBoard(BoardOptions{Client: c.Client, Namespace: ns, Identity: identity, Expiry: expiry})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return b
}

// sees waits until the board has a report from each follower: a follower
// the leader has not seen yet is not waited for.
func sees(t *testing.T, b *Board, identities ...string) {
	t.Helper()
	kubetest.Eventually(t, 10*time.Second, "the board sees the followers", func() (bool, string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, id := range identities {
			if _, ok := b.reports[ConfigMapName(id)]; !ok {
				return false, "no report of " + id
			}
		}
		return true, ""
	})
}

// waitAsync runs b.Wait in the background; its result arrives on the channel.
func waitAsync(b *Board, host, routes string, within time.Duration) <-chan error {
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		res <- b.Wait(ctx, host, routes)
	}()
	return res
}

// TestBoardWaitsForLiveFollowers: through real ConfigMaps on a real
// apiserver, the leader's Wait returns once every live follower's clients
// ACKed the routes, is held by a follower whose clients have not, fails
// with ErrNack on a follower's NACK, stops waiting for a follower whose
// heartbeat stopped, and never waits for the leader's own old report.
func TestBoardWaitsForLiveFollowers(t *testing.T) {
	c := kubetest.Shared(t)
	const host = "checkout.shop"
	tests := []struct {
		name string
		run  func(t *testing.T, ns string)
	}{
		{"a slow follower holds the wait until its clients ACK", func(t *testing.T, ns string) {
			a, _ := follower(t, c, ns, "sluice-a")
			bf, _ := follower(t, c, ns, "sluice-b")
			a.Set(host, HostAck{Routes: "r1"})
			bf.Set(host, HostAck{Routes: "r0"}) // b's clients still on the old routes
			b := board(t, c, ns, "sluice-leader")
			sees(t, b, "sluice-a", "sluice-b")
			res := waitAsync(b, host, "r1", 30*time.Second)
			select {
			case err := <-res:
				t.Fatalf("wait returned (%v) while follower b's clients had not ACKed", err)
			case <-time.After(3 * heartbeat):
			}
			bf.Set(host, HostAck{Routes: "r1"})
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("wait after every follower ACKed: %v", err)
				}
			case <-time.After(expiry / 2): // sooner than b could expire
				t.Fatal("wait still pending after follower b's clients ACKed")
			}
		}},
		{"a NACK on a follower fails the wait", func(t *testing.T, ns string) {
			a, _ := follower(t, c, ns, "sluice-a")
			b := board(t, c, ns, "sluice-leader")
			sees(t, b, "sluice-a")
			res := waitAsync(b, host, "r2", 30*time.Second)
			a.Set(host, HostAck{Routes: "r2", Nack: "route weights sum to 0"})
			if err := <-res; !errors.Is(err, gateway.ErrNack) {
				t.Fatalf("wait = %v, want an error wrapping gateway.ErrNack", err)
			}
		}},
		{"a dead follower is waited for at most the expiry", func(t *testing.T, ns string) {
			a, stop := follower(t, c, ns, "sluice-a")
			a.Set(host, HostAck{Routes: "r0"})
			b := board(t, c, ns, "sluice-leader")
			sees(t, b, "sluice-a")
			stop()
			start := time.Now()
			if err := <-waitAsync(b, host, "r3", 30*time.Second); err != nil {
				t.Fatalf("wait for a dead follower: %v", err)
			}
			if took := time.Since(start); took > expiry+time.Second {
				t.Fatalf("wait for a dead follower took %s, want at most the expiry %s", took, expiry)
			}
		}},
		{"the leader's own report from when it followed is ignored", func(t *testing.T, ns string) {
			self, _ := follower(t, c, ns, "sluice-leader")
			self.Set(host, HostAck{Routes: "old"})
			a, _ := follower(t, c, ns, "sluice-a")
			a.Set(host, HostAck{Routes: "r4"})
			b := board(t, c, ns, "sluice-leader")
			sees(t, b, "sluice-a")
			if err := <-waitAsync(b, host, "r4", 5*time.Second); err != nil {
				t.Fatalf("wait: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, c.Namespace(t)) })
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
