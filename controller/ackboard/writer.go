package ackboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultHeartbeat is how often a Writer rewrites its ConfigMap when
// nothing changed; DefaultExpiry (three beats) is when a Board stops
// waiting for it.
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultExpiry    = 15 * time.Second
)

// WriterOptions configure a follower's Writer.
type WriterOptions struct {
	Client    kubernetes.Interface
	Namespace string // sluice's namespace
	Identity  string // this replica's leader-election identity
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Writer publishes one follower's report. Set records what its clients
// did; Run writes it at once and at every heartbeat.
type Writer struct {
	opts WriterOptions
	name string

	mu    sync.Mutex
	hosts map[string]HostAck
	dirty chan struct{} // one pending wake-up
}

// NewWriter checks the options and fills defaults.
func NewWriter(opts WriterOptions) (*Writer, error) {
	if opts.Client == nil || opts.Namespace == "" || opts.Identity == "" {
		return nil, errors.New("ackboard writer: Client, Namespace and Identity are required")
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{opts: opts, name: ConfigMapName(opts.Identity), hosts: map[string]HostAck{}, dirty: make(chan struct{}, 1)}, nil
}

// Set records what this follower's clients did with the routes of host.
func (w *Writer) Set(host string, a HostAck) {
	w.mu.Lock()
	w.hosts[host] = a
	w.mu.Unlock()
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// Run writes the report when it changes and at every heartbeat until ctx
// ends. A failed write is logged and tried again at the next beat: the
// leader then waits for this follower at most the expiry.
func (w *Writer) Run(ctx context.Context) error {
	tick := time.NewTicker(w.opts.Heartbeat)
	defer tick.Stop()
	var beat uint64
	for {
		beat++
		if err := w.write(ctx, beat); err != nil && ctx.Err() == nil {
			w.opts.Logger.Warn("write xds acks for the leader", "configmap", w.opts.Namespace+"/"+w.name, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-w.dirty:
		}
	}
}

// write replaces the ConfigMap without a resourceVersion: this follower is
// its only writer, so there is nothing to merge with.
func (w *Writer) write(ctx context.Context, beat uint64) error {
	w.mu.Lock()
	r := report{Identity: w.opts.Identity, Beat: beat, Hosts: maps.Clone(w.hosts)}
	w.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.opts.Namespace, Labels: map[string]string{LabelBoard: labelValue(w.opts.Identity)}},
		Data:       map[string]string{dataKey: string(b)},
	}
	cms := w.opts.Client.CoreV1().ConfigMaps(w.opts.Namespace)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "sluice"})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "sluice"})
	}
	if err != nil {
		return fmt.Errorf("configmap %s/%s: %w", w.opts.Namespace, w.name, err)
	}
	return nil
}

// labelValue is identity as a label value (63 characters at most).
func labelValue(identity string) string {
	v := ConfigMapName(identity)[len(namePrefix):]
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-.")
	}
	return v
}
