package ackboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/gateway"
)

// BoardOptions configure the leader's Board.
type BoardOptions struct {
	Client    kubernetes.Interface
	Namespace string // sluice's namespace
	Identity  string // the leader's own identity: its report (from when it followed) is not waited for
	Expiry    time.Duration
	Logger    *slog.Logger
	// Now is the leader's clock (time.Now when nil); tests move it.
	Now func() time.Time
}

// Board is the leader's view of the followers' reports.
type Board struct {
	opts     BoardOptions
	self     string
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	reports map[string]seen // by ConfigMap name
	changed chan struct{}   // closed and replaced at every change
}

// seen is a report and when the leader last saw its ConfigMap change.
type seen struct {
	report
	at time.Time
}

// NewBoard checks the options; Start watches the reports.
func NewBoard(opts BoardOptions) (*Board, error) {
	if opts.Client == nil || opts.Namespace == "" {
		return nil, errors.New("ackboard: Client and Namespace are required")
	}
	if opts.Expiry <= 0 {
		opts.Expiry = DefaultExpiry
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Board{opts: opts, self: ConfigMapName(opts.Identity), reports: map[string]seen{}, changed: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = LabelBoard }))
	b.informer = factory.Core().V1().ConfigMaps().Informer()
	if _, err := b.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.observe,
		UpdateFunc: func(_, obj any) { b.observe(obj) },
		DeleteFunc: b.forget,
	}); err != nil {
		return nil, fmt.Errorf("ackboard: watch configmaps: %w", err)
	}
	return b, nil
}

// Start watches the followers' ConfigMaps until ctx ends and waits at
// most syncWithin until they are listed once. On an error the watch goes
// on: a follower not listed yet is not waited for.
func (b *Board) Start(ctx context.Context, syncWithin time.Duration) error {
	go b.informer.Run(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncWithin)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), b.informer.HasSynced) {
		return fmt.Errorf("ackboard: list configmaps -l %s in %s (RBAC: configmaps list, watch): %w", LabelBoard, b.opts.Namespace, context.Cause(syncCtx))
	}
	return nil
}

func (b *Board) observe(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name == b.self {
		return
	}
	r, err := decodeReport(cm.Data)
	if err != nil {
		b.opts.Logger.Warn("undecodable xds acks of a follower", "configmap", cm.Namespace+"/"+cm.Name, "err", err)
		return
	}
	b.mu.Lock()
	b.reports[cm.Name] = seen{report: r, at: b.opts.Now()}
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *Board) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	b.mu.Lock()
	delete(b.reports, cm.Name)
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *Board) wakeLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Wait returns nil once every live follower reports routes for host as
// ACKed by its clients. A live follower whose client NACKed those routes
// makes it return an error wrapping gateway.ErrNack. When ctx ends first
// it returns an error wrapping ctx.Err() that names the followers still
// pending. A follower whose ConfigMap has not changed for the expiry is
// dead and not waited for.
func (b *Board) Wait(ctx context.Context, host, routes string) error {
	for {
		b.mu.Lock()
		pending, nextExpiry, err := b.statusLocked(host, routes)
		changed := b.changed
		b.mu.Unlock()
		if err != nil || len(pending) == 0 {
			return err
		}
		t := time.NewTimer(nextExpiry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for followers' acks of %s: pending %s: %w", host, strings.Join(pending, ", "), ctx.Err())
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// statusLocked lists the live followers that have not ACKed routes for
// host, and how long until the first of them expires.
func (b *Board) statusLocked(host, routes string) ([]string, time.Duration, error) {
	now := b.opts.Now()
	var pending []string
	next := b.opts.Expiry
	for _, s := range b.reports {
		left := s.at.Add(b.opts.Expiry).Sub(now)
		if left <= 0 {
			continue // dead: its heartbeat stopped
		}
		a, ok := s.Hosts[host]
		switch {
		case ok && a.Routes == routes && a.Nack != "":
			return nil, 0, fmt.Errorf("a client of follower %s rejected the routes of %s: %s: %w", s.Identity, host, a.Nack, gateway.ErrNack)
		case ok && a.Routes == routes:
			continue
		}
		pending = append(pending, s.Identity)
		next = min(next, left)
	}
	sort.Strings(pending)
	return pending, next, nil
}
