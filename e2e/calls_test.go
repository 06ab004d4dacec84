package e2e

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway/probe"
)

// callLog keeps every call of a load generator from its start: the
// generator's Observe forgets what is older than its window, and a test
// that judges a whole story must see every call in it.
type callLog struct {
	mu    sync.Mutex
	calls []probe.Answer
}

func (l *callLog) add(a probe.Answer) {
	l.mu.Lock()
	l.calls = append(l.calls, a)
	l.mu.Unlock()
}

// all is a copy of every call so far, in the order they ended.
func (l *callLog) all() []probe.Answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// since is the calls that started at or after from.
func (l *callLog) since(from time.Time) []probe.Answer {
	var out []probe.Answer
	for _, a := range l.all() {
		if !a.Started.Before(from) {
			out = append(out, a)
		}
	}
	return out
}

// startLoggedLoad is startLoad with every call kept in the returned log.
func startLoggedLoad(t testing.TB, opts probe.LoadOptions) (*probe.LoadGen, *callLog) {
	t.Helper()
	log := &callLog{}
	opts.OnCall = log.add
	return startLoad(t, opts), log
}

// callTally counts calls by what answered them.
type callTally struct {
	answered  map[string]int // OK calls by the version that answered
	failed    int            // calls that failed, answered by a version or not
	noVersion int            // OK calls no backend named itself in
}

func tally(calls []probe.Answer) callTally {
	c := callTally{answered: map[string]int{}}
	for _, a := range calls {
		switch {
		case a.Err != nil:
			c.failed++
		case a.Version == "":
			c.noVersion++
		default:
			c.answered[a.Version]++
		}
	}
	return c
}
