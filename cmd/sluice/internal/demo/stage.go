package demo

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/gateway/probe"
)

// stage runs the demo's supporting services (the two backends and the
// alert sink) on loopback ports until its context ends.
type stage struct {
	backends map[string]*stagedBackend
	sink     *Sink
	sinkURL  string

	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

type stagedBackend struct {
	*probe.Backend
	grpcAddr, httpAddr string
}

func listen() (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback: %w", err)
	}
	return l, nil
}

// startStage starts one backend per version (failing as given) and the sink.
func startStage(ctx context.Context, failure map[string]float64, window time.Duration) (*stage, error) {
	s := &stage{backends: map[string]*stagedBackend{}, sink: NewSink()}
	serve := func(f func() error) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := f(); err != nil {
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
			}
		}()
	}
	for _, v := range []string{StableVersion, CanaryVersion} {
		b, err := probe.NewBackend(probe.BackendOptions{Version: v, FailureRate: failure[v], Window: window})
		if err != nil {
			return nil, err
		}
		gl, err := listen()
		if err != nil {
			return nil, err
		}
		hl, err := listen()
		if err != nil {
			gl.Close()
			return nil, err
		}
		s.backends[v] = &stagedBackend{Backend: b, grpcAddr: gl.Addr().String(), httpAddr: hl.Addr().String()}
		serve(func() error { return b.Serve(ctx, gl, hl) })
	}
	sl, err := listen()
	if err != nil {
		return nil, err
	}
	s.sinkURL = "http://" + sl.Addr().String() + "/alerts"
	serve(func() error { return s.sink.Serve(ctx, sl) })
	return s, nil
}

// wait blocks until every service stopped (after ctx ended).
func (s *stage) wait() error {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) > 0 {
		return s.errs[0]
	}
	return nil
}

// strategy is the demo strategy pointing at this stage's backends.
func (s *stage) strategy(speed float64) Strategy {
	eps := map[string]string{}
	for v, b := range s.backends {
		eps[v] = b.grpcAddr
	}
	return Strategy{Endpoints: eps, StatsURL: "http://" + s.backends[CanaryVersion].httpAddr + "/stats", Speed: speed}
}

// pokeWebhook tells the daemon the branch moved, with a generic signed
// webhook, so the push is fetched at once instead of at the next poll.
func pokeWebhook(ctx context.Context, httpAddr string, secret []byte) error {
	body := []byte(`{"ref": "refs/heads/` + Branch + `"}`)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/hook/generic", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
