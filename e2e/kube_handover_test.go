package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestKubeFollowerHandsXDSOver: when a follower becomes the leader, its
// xDS address never refuses a connection. The leader is killed while
// clients keep dialing the follower: a TCP dialer every millisecond, and
// real gRPC xDS clients made afresh one after another, each making one
// call (a gRPC client refused before its first resource fails its waiting
// calls), besides clients connected all along. The follower hands its
// bound xDS socket to its new daemon, so that none is refused and no call
// fails; closing and binding it again refused the dialers in between.
func TestKubeFollowerHandsXDSOver(t *testing.T) {
	h := newHARig(t)
	spec := kubeRollout{Name: "ho", Namespace: h.ns, Host: "ho.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 50\n- pause: {}\n"}
	lead, follower := h.leaderAndFollower(spec)
	connected := startLoad(t, probe.LoadOptions{XDSServer: follower.xdsAddr, Host: spec.Host, Clients: 2, Rate: 200, NodePrefix: "connected"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := connected.WaitFirst(ctx, v1)
	cancel()
	if err != nil {
		t.Fatalf("clients on the follower never reached v1: %v", err)
	}

	dialing, stopDialing := context.WithCancel(context.Background())
	refused := dialRepeatedly(dialing, t, follower.xdsAddr)
	fresh := callFreshClients(dialing, follower.xdsAddr, spec.Host, 3)
	t.Cleanup(func() { stopDialing(); refused.wait(); fresh.wait() }) // after a Fatal
	if err := lead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lead.exited
	killed := time.Now()
	kubetest.Eventually(t, haTakeover, "the follower leads and serves", func() (bool, string) {
		return h.holder() == follower.identity && ready(follower), "lease holder " + h.holder()
	})
	t.Logf("the follower leads %s after the kill", time.Since(killed).Round(time.Millisecond))
	// Its daemon serves xDS once the restored rollout republished its
	// traffic; fresh clients made after that are answered by it.
	after := fresh.made()
	kubetest.Eventually(t, 30*time.Second, "fresh clients answered by the new leader", func() (bool, string) {
		return fresh.made() >= after+6, fmt.Sprintf("%d fresh clients since ready", fresh.made()-after)
	})
	stopDialing()
	dials, refusals := refused.wait()
	made, failures := fresh.wait()
	t.Logf("during the takeover: %d TCP dials, %d refused; %d fresh gRPC xDS clients, %d failed calls", dials, refusals, made, len(failures))
	if refusals > 0 {
		t.Errorf("%d of %d TCP dials to the follower's xDS address were refused during the takeover", refusals, dials)
	}
	for i, err := range failures {
		if i == 5 {
			t.Errorf("... and %d more", len(failures)-5)
			break
		}
		t.Errorf("fresh xDS client's call failed: %v", err)
	}
	failed := 0
	for _, split := range connected.Observe().Class {
		for _, cnt := range split {
			failed += cnt.Failed
		}
	}
	if failed > 0 {
		t.Errorf("clients connected to the follower all along: %d failed calls (%v)", failed, connected.Observe().Class)
	}
}

// tcpDialer counts TCP dials and refusals.
type tcpDialer struct {
	dials, refusals atomic.Int64
	done            chan struct{}
}

// dialRepeatedly dials addr every millisecond until ctx ends.
func dialRepeatedly(ctx context.Context, t *testing.T, addr string) *tcpDialer {
	d := &tcpDialer{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			d.dials.Add(1)
			switch {
			case errors.Is(err, syscall.ECONNREFUSED):
				d.refusals.Add(1)
			case err != nil:
				t.Logf("dial %s: %v", addr, err)
			default:
				conn.Close()
			}
		}
	}()
	return d
}

func (d *tcpDialer) wait() (dials, refusals int64) {
	<-d.done
	return d.dials.Load(), d.refusals.Load()
}

// freshClients makes gRPC xDS clients one after another, each with its own
// xDS client (as a new process would), and makes one call on each.
type freshClients struct {
	wg       sync.WaitGroup
	count    atomic.Int64
	mu       sync.Mutex
	failures []error
}

// callFreshClients runs workers that each make fresh clients until ctx
// ends.
func callFreshClients(ctx context.Context, addr, host string, workers int) *freshClients {
	f := &freshClients{}
	for w := range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				err := callOnce(fmt.Sprintf("fresh-%d-%d", w, i), addr, host)
				f.count.Add(1)
				if err != nil {
					f.mu.Lock()
					f.failures = append(f.failures, err)
					f.mu.Unlock()
				}
			}
		}()
	}
	return f
}

func (f *freshClients) made() int64 { return f.count.Load() }

func (f *freshClients) wait() (int64, []error) {
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count.Load(), f.failures
}

// callOnce makes a new gRPC xDS client of addr as node and one call to
// host; the call waits for its routes (wait-for-ready), as an
// application's first call does. Its time bound is not the context of
// the loop, so that stopping the loop does not fail a call.
func callOnce(node, addr, host string) error {
	rb, err := xds.NewXDSResolverWithConfigForTesting(probe.Bootstrap(addr, node))
	if err != nil {
		return fmt.Errorf("%s: xds resolver: %w", node, err)
	}
	cc, err := grpc.NewClient("xds:///"+host, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%s: dial: %w", node, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := time.Now()
	if _, err := probe.Call(ctx, cc); err != nil {
		return fmt.Errorf("%s: call started %s: %w", node, started.UTC().Format("15:04:05.000"), err)
	}
	return nil
}
