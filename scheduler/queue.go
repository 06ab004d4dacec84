package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrQueueFull is returned by Enqueue when the bounded queue has no room;
// the pod was not queued and the caller should retry later.
var ErrQueueFull = errors.New("scheduling queue full")

// queue is a bounded FIFO ring of pods waiting for a cycle.
type queue struct {
	mu    sync.Mutex
	buf   []*Pod
	head  int
	n     int
	ready chan struct{}
}

func (q *queue) init(size int) {
	q.buf = make([]*Pod, size)
	q.ready = make(chan struct{}, 1)
}

// Enqueue adds a pod to the input queue without blocking. A full queue
// returns ErrQueueFull: nothing is dropped silently. The scheduler keeps
// the pointer until the pod's Result is emitted.
func (s *Scheduler) Enqueue(p *Pod) error {
	if p == nil {
		return errors.New("enqueue: nil pod")
	}
	q := &s.queue
	q.mu.Lock()
	if q.n == len(q.buf) {
		q.mu.Unlock()
		return fmt.Errorf("enqueue %s: %w (%d pods waiting)", p.Name, ErrQueueFull, len(q.buf))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = p
	q.n++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return nil
}

// Pending is the number of queued pods.
func (s *Scheduler) Pending() int {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	return s.queue.n
}

func (q *queue) pop() *Pod {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil
	}
	p := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return p
}

// Drain schedules every queued pod, in order, passing each Result to emit;
// it returns how many it scheduled.
func (s *Scheduler) Drain(ctx context.Context, emit func(Result)) (int, error) {
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("drain: %w", err)
		}
		p := s.queue.pop()
		if p == nil {
			return n, nil
		}
		emit(s.ScheduleOne(ctx, p))
		n++
	}
}

// Run schedules queued pods as they arrive until ctx ends.
func (s *Scheduler) Run(ctx context.Context, emit func(Result)) error {
	for {
		if _, err := s.Drain(ctx, emit); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.queue.ready:
		}
	}
}
