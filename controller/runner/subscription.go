package runner

import (
	"context"
	"sync"

	"github.com/sluice-dev/sluice/api"
)

// Subscription holds the status changes a subscriber has not read yet,
// the newest per rollout. A subscriber that falls behind (in a commit of
// a thousand rollouts every internal subscriber does) finds one update per
// changed rollout, its latest, in the order the rollouts first changed:
// it skips intermediate statuses but never misses where a rollout is now.
// What it holds is bounded by the number of rollouts, and publishing never
// waits for the subscriber. (A fixed-size channel that dropped the newest
// update when full lost exactly the one that mattered.)
type Subscription struct {
	mu      sync.Mutex
	pending map[api.Key]Update
	order   []api.Key // the keys of pending, oldest first
	wake    chan struct{}
	done    chan struct{} // closed by Cancel or the runner's Close
	once    sync.Once
	cancel  func()
}

func newSubscription() *Subscription {
	return &Subscription{pending: map[api.Key]Update{}, wake: make(chan struct{}, 1), done: make(chan struct{}), cancel: func() {}}
}

// offer replaces the rollout's pending update with u.
func (s *Subscription) offer(u Update) {
	s.mu.Lock()
	if _, ok := s.pending[u.Key]; !ok {
		s.order = append(s.order, u.Key)
	}
	s.pending[u.Key] = u
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next returns the oldest pending update, waiting for one until ctx ends
// or the subscription is cancelled or closed (then false). What is
// pending is returned first, also after those.
func (s *Subscription) Next(ctx context.Context) (Update, bool) {
	for {
		if u, ok := s.pop(); ok {
			return u, true
		}
		select {
		case <-s.wake:
		case <-s.done:
			return s.pop()
		case <-ctx.Done():
			return Update{}, false
		}
	}
}

func (s *Subscription) pop() (Update, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return Update{}, false
	}
	key := s.order[0]
	s.order[0] = api.Key{}
	s.order = s.order[1:]
	u := s.pending[key]
	delete(s.pending, key)
	return u, true
}

// Cancel ends the subscription: the runner sends it nothing more.
func (s *Subscription) Cancel() { s.cancel() }

func (s *Subscription) close() { s.once.Do(func() { close(s.done) }) }
