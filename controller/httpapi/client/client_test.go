package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/apitest"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
)

func status(name string, phase rollout.Phase) httpapi.RolloutStatus {
	return httpapi.RolloutStatus{Namespace: "default", Name: name, Phase: phase, StepCount: 2, Weights: api.Weights{Stable: 100}}
}

func TestStreamParsesFrames(t *testing.T) {
	// A hand-written stream with everything SSE allows: comments, event
	// and id lines, a data field split over two lines, CRLF-free framing.
	raw := ": hello\n\n" +
		"id: 1\nevent: ignored\ndata: {\"seq\":1,\"namespace\":\"default\",\"name\":\"a\",\"type\":\"status\"}\n\n" +
		": ping\n\n" +
		"data: {\"seq\":2,\"namespace\":\"default\",\n" +
		"data: \"name\":\"b\",\"type\":\"rollout-started\",\"message\":\"go\"}\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/events" || r.URL.Query().Get("rollout") != "" {
			t.Errorf("request %s", r.URL)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, raw)
	}))
	defer srv.Close()
	c, err := client.New(client.Options{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var got []httpapi.Event
	err = c.Stream(context.Background(), nil, nil, func(e httpapi.Event) error { got = append(got, e); return nil })
	if !errors.Is(err, io.EOF) {
		t.Errorf("end of stream = %v, want io.EOF", err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].Message != "go" {
		t.Errorf("events = %+v", got)
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	be := apitest.New(status("a", rollout.PhaseHealthy))
	be.Refuse(rollout.CmdResume)
	h, _ := httpapi.New(httpapi.Options{Backend: be, Token: "t"})
	srv := httptest.NewServer(h)
	defer srv.Close()
	good, _ := client.New(client.Options{Server: srv.URL, Token: "t"})
	anon, _ := client.New(client.Options{Server: strings.TrimPrefix(srv.URL, "http://")})
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"get unknown", func() error { _, err := good.Get(ctx, api.ParseKey("nope")); return err }, httpapi.ErrNotFound},
		{"refused", func() error { _, err := good.Command(ctx, api.ParseKey("a"), "resume", false); return err }, httpapi.ErrNotAllowed},
		{"no token", func() error { _, err := anon.Command(ctx, api.ParseKey("a"), "abort", false); return err }, client.ErrUnauthorized},
		{"full on abort", func() error { _, err := good.Command(ctx, api.ParseKey("a"), "abort", true); return err }, httpapi.ErrBadCommand},
		{"reads need no token", func() error { _, err := anon.List(ctx); return err }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// cutFirstStream ends the first event stream right after it opened, as a
// daemon restart would.
type cutFirstStream struct {
	h     http.Handler
	calls atomic.Int32
}

func (c *cutFirstStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/v1/events" && c.calls.Add(1) == 1 {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": bye\n\n")
		return
	}
	c.h.ServeHTTP(w, r)
}

func TestWatchReconnectsAndFollows(t *testing.T) {
	be := apitest.New(status("a", rollout.PhasePaused), status("b", rollout.PhaseHealthy))
	h, _ := httpapi.New(httpapi.Options{Backend: be})
	cut := &cutFirstStream{h: h}
	srv := httptest.NewServer(cut)
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := make(chan client.Update, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, api.ParseKey("a"), func(u client.Update) error { updates <- u; return nil })
	}()
	next := func() client.Update {
		select {
		case u := <-updates:
			return u
		case <-time.After(20 * time.Second):
			t.Fatal("no update")
		}
		return client.Update{}
	}
	// Snapshot from the first connection, then again after the reconnect.
	for i := range 2 {
		if u := next(); u.Latest != nil || u.Status.Phase != rollout.PhasePaused {
			t.Fatalf("snapshot %d = %+v", i, u)
		}
	}
	if n := cut.calls.Load(); n != 2 {
		t.Errorf("%d stream connections, want 2", n)
	}
	be.Set(status("b", rollout.PhaseDegraded), "rollout-aborted", "not ours")
	st := status("a", rollout.PhaseProgressing)
	st.StepIndex = 1
	be.Set(st, "step-completed", "pause done")
	u := next()
	if u.Latest == nil || u.Latest.Type != "step-completed" || u.Status.StepIndex != 1 || u.Status.Phase != rollout.PhaseProgressing {
		t.Errorf("update = %+v, want a's step-completed with the new status", u)
	}
	if len(u.Events) != 1 {
		t.Errorf("events = %+v, want only a's one event", u.Events)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch after cancel = %v, want nil", err)
	}
}

func TestWatchUnknownRollout(t *testing.T) {
	h, _ := httpapi.New(httpapi.Options{Backend: apitest.New()})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})
	err := c.Watch(context.Background(), api.ParseKey("nope"), func(client.Update) error { return nil })
	if !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("Watch(nope) = %v, want ErrNotFound", err)
	}
}

func TestNewRejectsBadServer(t *testing.T) {
	for _, s := range []string{"ftp://x", "http://", "::"} {
		t.Run(s, func(t *testing.T) {
			if _, err := client.New(client.Options{Server: s}); err == nil {
				t.Errorf("New(%q) accepted", s)
			}
		})
	}
}

// follower is a replica's backend that does not lead: reads as usual,
// every command refused naming the leader.
type follower struct{ *apitest.Backend }

func (follower) Command(context.Context, api.Key, rollout.Command) (httpapi.RolloutStatus, error) {
	return httpapi.RolloutStatus{}, &httpapi.NotLeaderError{Leader: "sluice-1"}
}

func (follower) Leader() string { return "sluice-1" }

// TestNotLeaderIsPlain: a follower's refusal reaches the caller (the CLI
// prints it as is) as ErrNotLeader, naming the leader in its message.
func TestNotLeaderIsPlain(t *testing.T) {
	h, _ := httpapi.New(httpapi.Options{Backend: follower{apitest.New(status("a", rollout.PhaseHealthy))}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})
	_, err := c.Command(context.Background(), api.ParseKey("a"), "promote", false)
	if !errors.Is(err, httpapi.ErrNotLeader) {
		t.Fatalf("err = %v, want ErrNotLeader", err)
	}
	want := "promote default/a: server answered 503: this replica follows and takes no writes: send them to the leader sluice-1"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want it to start with %q", err, want)
	}
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Leader != "sluice-1" {
		t.Errorf("err = %#v, want a *client.Error with Leader sluice-1", err)
	}
	if _, err := c.Get(context.Background(), api.ParseKey("a")); err != nil {
		t.Errorf("a read on a follower: %v", err)
	}
}
