package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway"
)

func followerState(name string, seq uint64, step, canary int32) rollout.State {
	return rollout.State{Key: api.Key{Namespace: "shop", Name: name}, Seq: seq, Commit: "c0ffee",
		Phase: rollout.PhaseProgressing, StableVersion: "app:v1", CanaryVersion: "app:v2", StepIndex: step,
		Weights: api.Weights{Stable: 100 - canary, Canary: canary}}
}

// sets is a fixed ReplicaSet view of the cluster.
type sets map[api.Key][]rollout.ReplicaSetStatus

func (s sets) Status(key api.Key) []rollout.ReplicaSetStatus { return s[key] }

// TestFollowerAPIServesRecords: the follower's backend lists and gets each
// record's state as State.Status (the runner's conversion) with the
// cluster's ReplicaSets, shows a record with no state yet as absent,
// publishes one status event per visible change, forgets deleted records,
// and refuses commands naming the leader.
func TestFollowerAPIServesRecords(t *testing.T) {
	f := newFollowerAPI(func() string { return "sluice-0" })
	rs := []rollout.ReplicaSetStatus{{Name: "cart-abc", Version: "app:v2", Hash: "abc", Replicas: 1, Ready: 1}}
	f.useClusters(sets{{Namespace: "shop", Name: "cart"}: rs})
	f.useClients(fakeClients{"cart.internal": {{Node: "grpc-1", Stream: 4, Version: "12", Current: true}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := f.Subscribe(ctx)

	cart, web := followerState("cart", 3, 0, 20), followerState("web", 7, 1, 50)
	f.observe(cart, recordTimes{})
	webTimes := recordTimes{"2026-12-02T10:00:00Z", "2026-12-02T10:05:00Z"}
	f.observe(web, webTimes)
	f.observe(followerState("empty", 0, 0, 0), recordTimes{})
	wantCart := cart.Status()
	wantCart.ReplicaSets = rs
	wantCart.Traffic.Clients = []rollout.ClientStatus{{Node: "grpc-1", Transport: "sotw", Stream: 4, Version: "12", Current: true}}
	wantCart.Traffic.ClientCount = 1
	wantWeb := web.Status()
	wantWeb.CreatedAt, wantWeb.PhaseSince = webTimes.createdAt, webTimes.phaseSince
	wantWeb.Traffic.Clients = []rollout.ClientStatus{} // served, no client here
	tests := []struct {
		name string
		key  api.Key
		want rollout.Status
		ok   bool
	}{
		{"with replica sets and this follower's xDS clients", cart.Key, wantCart, true},
		{"another, with its record's times", web.Key, wantWeb, true},
		{"record with no state", api.Key{Namespace: "shop", Name: "empty"}, rollout.State{}.Status(), false},
		{"unknown", api.Key{Namespace: "shop", Name: "nope"}, rollout.State{}.Status(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := f.Get(tt.key)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Get(%s) = %+v, %v; want %+v, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
	if got := f.List(); len(got) != 2 {
		t.Errorf("List = %d rollouts, want cart and web", len(got))
	} else {
		for _, st := range got {
			if st.Traffic.Clients != nil {
				t.Errorf("List lists the xDS clients of %s: only the status of one rollout has them", st.Name)
			}
			if st.Name == "web" && st.CreatedAt != webTimes.createdAt {
				t.Errorf("List: web createdAt %q, want %q", st.CreatedAt, webTimes.createdAt)
			}
		}
	}

	t.Run("events per visible change", func(t *testing.T) {
		drain(t, events, 2)            // cart and web
		f.observe(cart, recordTimes{}) // the same record again (a re-list)
		next := followerState("cart", 4, 1, 50)
		f.observe(next, recordTimes{})
		e := drain(t, events, 1)[0]
		if e.Type != "status" || e.Status == nil || e.Status.StepIndex != 1 || e.Status.Weights.Canary != 50 {
			t.Errorf("event = %+v, want cart's status at step 1, 50%%", e)
		}
		if n := len(f.Recent(cart.Key)); n != 2 {
			t.Errorf("cart's recent events = %d, want 2", n)
		}
	})
	t.Run("deleted record", func(t *testing.T) {
		f.forget(web.Key)
		if _, ok := f.Get(web.Key); ok {
			t.Error("web is still served after its record was deleted")
		}
	})
	t.Run("commands refused naming the leader", func(t *testing.T) {
		_, err := f.Command(ctx, cart.Key, rollout.Command{Kind: rollout.CmdPromote})
		var nl *httpapi.NotLeaderError
		if !errors.As(err, &nl) || nl.Leader != "sluice-0" || !errors.Is(err, httpapi.ErrNotLeader) {
			t.Errorf("promote on a follower: %v, want a NotLeaderError naming sluice-0", err)
		}
	})
}

// drain reads n events, failing after a while: Publish is synchronous, so
// they are already buffered.
func drain(t *testing.T, events <-chan httpapi.Event, n int) []httpapi.Event {
	t.Helper()
	var got []httpapi.Event
	for range n {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d events, want %d", len(got), n)
		}
	}
	select {
	case e := <-events:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
	return got
}

// TestFollowerReadiness: a follower is Ready only once it serves xDS from
// the records it read.
func TestFollowerReadiness(t *testing.T) {
	tests := []struct {
		name    string
		serving bool
		synced  bool
		ready   bool
	}{
		{"reading before serving", false, false, false},
		{"serving, records not read", true, false, false},
		{"serving the records", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFollowerAPI(func() string { return "" })
			if tt.serving {
				f.serving(func() bool { return tt.synced })
			}
			if err := f.ready(); (err == nil) != tt.ready {
				t.Errorf("ready() = %v, want ready %v", err, tt.ready)
			}
		})
	}
}

// TestFollowerHTTP: a follower's HTTP address serves the API handler on
// its records (reads, its own /metrics, the dashboard), is not Ready until
// it serves xDS, and answers writes 503.
func TestFollowerHTTP(t *testing.T) {
	view := newFollowerAPI(func() string { return "sluice-0" })
	view.observe(followerState("cart", 3, 0, 20), recordTimes{})
	tests := []struct {
		name           string
		view           *followerAPI
		serving        bool
		method, path   string
		wantCode       int
		wantBodyPrefix string
	}{
		{"not ready before serving xDS", view, false, "GET", "/readyz", 503, "not ready: following: reading"},
		{"ready once serving", view, true, "GET", "/readyz", 200, "ok"},
		{"status", view, true, "GET", "/api/v1/rollouts/shop/cart", 200, `{"namespace":"shop","name":"cart"`},
		{"own metrics", view, true, "GET", "/metrics", 200, "# HELP go_"},
		{"dashboard", view, true, "GET", "/ui/", 200, ""},
		{"write refused", view, true, "POST", "/api/v1/rollouts/shop/cart/abort", 503, `{"error":"this replica follows`},
		{"alive", view, false, "GET", "/healthz", 200, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.serving {
				tt.view.serving(func() bool { return true })
			}
			f, err := serveFollower(daemon.Options{HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}, tt.view)
			if err != nil {
				t.Fatal(err)
			}
			defer f.stop()
			req, _ := http.NewRequest(tt.method, "http://"+f.handoff.lis.Addr().String()+tt.path, nil)
			req.Header.Set(httpapi.ClientHeader, "test") // writes without it are refused before the follower sees them
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || !strings.HasPrefix(string(body), tt.wantBodyPrefix) {
				t.Errorf("%s %s = %d %.80q, want %d %q…", tt.method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBodyPrefix)
			}
		})
	}
}

// fakeClients serves each host named ("<name>.internal") with its clients.
type fakeClients map[string][]gateway.ClientAck

func (f fakeClients) Host(key api.Key) (string, bool) {
	h := key.Name + ".internal"
	if key.Name == "empty" || key.Name == "nope" {
		return "", false
	}
	return h, true
}

func (f fakeClients) ClientsOf(host string, limit int) ([]gateway.ClientAck, int) {
	return f[host], len(f[host])
}
