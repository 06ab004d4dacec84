package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
)

// progress follows the daemon's event stream and records, for each
// watched rollout, when its status first showed the commit at step ≥ 1
// (step 0's weight ACKed) and at step ≥ 2 (analysis passed). The times are
// the daemon's own event timestamps (same clock as this process).
type progress struct {
	commit string
	want   map[string]bool

	mu           sync.Mutex
	step1, step2 map[string]time.Time
	events       []time.Time // every status event of a watched rollout
	polled       int         // step times filled by polling (stream dropped them)
	changed      chan struct{}
}

func newProgress(commit string, keys []string) *progress {
	p := &progress{commit: commit, want: map[string]bool{}, step1: map[string]time.Time{}, step2: map[string]time.Time{}, changed: make(chan struct{})}
	for _, k := range keys {
		p.want[k] = true
	}
	return p
}

// follow streams events until ctx ends; connected is closed once the
// stream is open.
func (p *progress) follow(ctx context.Context, c *client.Client, connected chan<- struct{}) error {
	return c.Stream(ctx, nil, func() error { close(connected); return nil }, func(e httpapi.Event) error {
		if e.Type == "status" && e.Status != nil {
			p.note(e.Namespace+"/"+e.Name, *e.Status, e.Time)
		}
		return nil
	})
}

func (p *progress) note(key string, st httpapi.RolloutStatus, at time.Time) {
	if !p.want[key] || st.Commit != p.commit {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, at)
	if _, ok := p.step1[key]; !ok && st.StepIndex >= 1 {
		p.step1[key] = at
	}
	if _, ok := p.step2[key]; !ok && st.StepIndex >= 2 {
		p.step2[key] = at
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait waits until every watched rollout reached step (1 or 2). Every 5s
// without progress it also reads the list, in case the stream dropped
// events under load (counted in polled).
func (p *progress) wait(ctx context.Context, c *client.Client, step int) error {
	for {
		p.mu.Lock()
		got := p.step1
		if step == 2 {
			got = p.step2
		}
		n, ch := len(got), p.changed
		p.mu.Unlock()
		if n == len(p.want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d rollouts reached step %d: %w", n, len(p.want), step, ctx.Err())
		case <-ch:
		case <-time.After(5 * time.Second):
			if err := p.poll(ctx, c); err != nil {
				return err
			}
		}
	}
}

func (p *progress) poll(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	items, err := c.List(ctx)
	if err != nil {
		return fmt.Errorf("list rollouts: %w", err)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range items {
		key := api.Key{Namespace: st.Namespace, Name: st.Name}.String()
		if !p.want[key] || st.Commit != p.commit {
			continue
		}
		if _, ok := p.step1[key]; !ok && st.StepIndex >= 1 {
			p.step1[key], p.polled = now, p.polled+1
		}
		if _, ok := p.step2[key]; !ok && st.StepIndex >= 2 {
			p.step2[key], p.polled = now, p.polled+1
		}
	}
	return nil
}

// eventsBetween counts the status events of watched rollouts in [from, to].
func (p *progress) eventsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.events {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}
