package clusters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// HealthOptions tune the probes; zero fields take the defaults.
type HealthOptions struct {
	// Interval between two probes of one cluster (default 10s).
	Interval time.Duration
	// Timeout bounds one probe (default 5s); a probe that takes longer
	// counts as a failure.
	Timeout time.Duration
	// Now is the clock the "since" times come from (default time.Now).
	Now func() time.Time
	// OnChange, when set, is called when a cluster goes down or comes
	// back, from the goroutine probing it (one per cluster, so calls for
	// one cluster come in order); it must not block for long.
	OnChange func(name string, down bool)
}

// Health probes every cluster's /readyz, each on its own, so that a
// cluster that hangs never delays the others' verdicts. It is safe for
// concurrent use.
type Health struct {
	o      HealthOptions
	probes map[string]rest.Interface

	mu   sync.Mutex
	down map[string]outage
}

// outage is a cluster's current unreachability.
type outage struct {
	since  time.Time // the start of the first failed probe
	reason string    // the last failed probe's error
}

// NewHealth prepares probes of clusters; Run runs them. Until its first
// probe has answered, a cluster counts as reachable.
func NewHealth(clusters []Cluster, o HealthOptions) (*Health, error) {
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Health{o: o, probes: map[string]rest.Interface{}, down: map[string]outage{}}
	for _, c := range clusters {
		cfg := rest.CopyConfig(c.Config)
		cfg.Timeout = o.Timeout // the apiserver then gives up when the probe does
		d, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("cluster %s (%s): %w", c.Name, c.Source, err)
		}
		h.probes[c.Name] = d.RESTClient()
	}
	return h, nil
}

// Run probes every cluster now and then every Interval until ctx ends;
// call it once.
func (h *Health) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for name, client := range h.probes {
		wg.Go(func() { h.follow(ctx, name, client) })
	}
	wg.Wait()
}

// follow probes one cluster until ctx ends.
func (h *Health) follow(ctx context.Context, name string, client rest.Interface) {
	tick := time.NewTicker(h.o.Interval)
	defer tick.Stop()
	for {
		start := h.o.Now()
		err := h.probe(ctx, client)
		if ctx.Err() != nil {
			return // a probe cut short by the end says nothing of the cluster
		}
		h.record(name, start, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe asks the apiserver whether it is ready to serve.
func (h *Health) probe(ctx context.Context, client rest.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, h.o.Timeout)
	defer cancel()
	err := client.Get().AbsPath("/readyz").Do(ctx).Error()
	var timeout interface{ Timeout() bool }
	if err != nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout()) {
		return fmt.Errorf("/readyz did not answer within %v: %w", h.o.Timeout, err)
	}
	return err
}

// record keeps one probe's result and reports a change.
func (h *Health) record(name string, start time.Time, err error) {
	h.mu.Lock()
	o, wasDown := h.down[name]
	if err == nil {
		delete(h.down, name)
	} else {
		if !wasDown {
			o.since = start
		}
		// One line: a failed /readyz's error holds the body, a line per check.
		o.reason = strings.Join(strings.Fields(err.Error()), " ")
		h.down[name] = o
	}
	h.mu.Unlock()
	if isDown := err != nil; isDown != wasDown && h.o.OnChange != nil {
		h.o.OnChange(name, isDown)
	}
}

// Unreachable says whether the cluster's last probe failed, since when
// (the first failed probe in a row) and why. A name Health does not probe
// counts as down, so that nothing acts on a cluster no one watches.
func (h *Health) Unreachable(name string) (since time.Time, reason string, down bool) {
	if _, ok := h.probes[name]; !ok {
		return time.Time{}, "not a cluster sluice manages", true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	o, down := h.down[name]
	return o.since, o.reason, down
}

// Reason is the status line of an unreachable cluster, e.g. "cluster eu-2
// unreachable since 12:03:04: <error>" (the time in UTC), or "" when it is
// reachable.
func (h *Health) Reason(name string) string {
	since, reason, down := h.Unreachable(name)
	if !down {
		return ""
	}
	if since.IsZero() {
		return fmt.Sprintf("cluster %s unreachable: %s", name, reason)
	}
	return fmt.Sprintf("cluster %s unreachable since %s: %s", name, since.UTC().Format(time.TimeOnly), reason)
}
