package replica

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
)

// TestHTTPHandoff: a client polling a follower's HTTP address while the
// leader's server takes the listener over never fails (no refused
// connection, no reset keep-alive), and its requests reach the leader from
// then on, keep-alive connections included; closing the leader's listener
// closes the socket.
func TestHTTPHandoff(t *testing.T) {
	view := newFollowerAPI(func() string { return "sluice-1" })
	follower, err := serveFollower(daemon.Options{HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}, view)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.stop()
	url := "http://" + follower.handoff.lis.Addr().String() + "/api/v1/info"

	// Two pollers: one with a new connection per request, as kubelet's
	// probes and the sluice CLI, which must never fail; one with
	// keep-alive, which must end up on the leader.
	probes := startPoller(url, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}})
	keepAlive := startPoller(url, &http.Client{Timeout: 10 * time.Second})
	waitFor(t, "the follower answers", func() bool { return answers(url) })

	leaderAPI, err := httpapi.New(httpapi.Options{Backend: newFollowerAPIAsLeader()})
	if err != nil {
		t.Fatal(err)
	}
	srv := leaderAPI.NewServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(follower.handoff.leader()) }()
	waitFor(t, "the pollers reach the leader", func() bool { return probes.fromLeader.Load() > 20 && keepAlive.fromLeader.Load() > 20 })
	probes.stop()
	keepAlive.stop()
	if n := probes.failures.Load(); n > 0 {
		t.Errorf("%d polls failed during the handover (last: %v)", n, probes.lastErr.Load())
	}
	t.Logf("polls: %d by new connections, %d by keep-alive (%d failed: a request sent on an idle connection as it was closed)",
		probes.polls.Load(), keepAlive.polls.Load(), keepAlive.failures.Load())
	// After the takeover no answer may come from the follower: keep-alive
	// connections to it were closed.
	c := &http.Client{}
	for range 20 {
		if leading, err := askFollowing(c, url); err != nil || !leading {
			t.Fatalf("after the takeover: leading=%v err=%v, want the leader's answer", leading, err)
		}
	}
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("leader's server: %v", err)
	}
	if conn, err := net.Dial("tcp", follower.handoff.lis.Addr().String()); err == nil {
		conn.Close()
		t.Error("the socket still accepts after the leader's server closed it")
	}
}

// poller asks url whether a follower answers, until stopped.
type poller struct {
	polls, failures, fromLeader atomic.Int64
	lastErr                     atomic.Value
	quit, done                  chan struct{}
}

func startPoller(url string, c *http.Client) *poller {
	p := &poller{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.quit:
				return
			default:
			}
			leading, err := askFollowing(c, url)
			p.polls.Add(1)
			switch {
			case err != nil:
				p.failures.Add(1)
				p.lastErr.Store(err.Error())
			case leading:
				p.fromLeader.Add(1)
			}
		}
	}()
	return p
}

func (p *poller) stop() {
	close(p.quit)
	<-p.done
}

// newFollowerAPIAsLeader is a backend with nothing to serve that is not a
// Follower: its /api/v1/info says it leads.
func newFollowerAPIAsLeader() httpapi.Backend {
	return struct{ httpapi.Backend }{newFollowerAPI(func() string { return "" })}
}

// askFollowing asks url (/api/v1/info) whether the replica that answered
// follows.
func askFollowing(c *http.Client, url string) (leading bool, err error) {
	resp, err := c.Get(url)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	var info httpapi.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return false, err
	}
	return !info.Following, nil
}

func answers(url string) bool {
	_, err := askFollowing(http.DefaultClient, url)
	return err == nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
