package scheduler

import "sync"

// pool is a fixed set of worker goroutines that run one task at a time
// across up to n workers; worker 0 is the caller. Keeping the goroutines
// alive (instead of starting some per pod) makes fanning out one cycle cost
// a channel send per worker.
type pool struct {
	wake   []chan struct{}
	wg     sync.WaitGroup
	task   func(worker int)
	closed bool
}

func newPool(n int) *pool {
	p := &pool{wake: make([]chan struct{}, n)}
	for w := 1; w < n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.loop(w)
	}
	return p
}

func (p *pool) size() int { return len(p.wake) }

func (p *pool) loop(w int) {
	for range p.wake[w] {
		p.task(w)
		p.wg.Done()
	}
}

// run calls task(0..workers-1) concurrently and waits for all. task must
// be a long-lived func value (a method value made once), so run does not
// allocate.
func (p *pool) run(workers int, task func(worker int)) {
	workers = max(1, min(workers, len(p.wake)))
	p.task = task
	p.wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		p.wake[w] <- struct{}{}
	}
	task(0)
	p.wg.Wait()
}

// close stops the workers; closing twice is a no-op.
func (p *pool) close() {
	if p.closed {
		return
	}
	p.closed = true
	for w := 1; w < len(p.wake); w++ {
		close(p.wake[w])
	}
}
