package scheduler

import (
	"context"
	"fmt"
	"math"
)

// Sampling constants from kube-scheduler (schedule_one.go).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
	defaultPercentageOfNodesToScore  = 50
)

// numFeasibleNodesToFind is how many feasible nodes a cycle looks for
// before it stops filtering: kube-scheduler's adaptive rule.
func numFeasibleNodesToFind(pct int32, n int) int {
	if n < minFeasibleNodesToFind || pct >= 100 {
		return n
	}
	if pct <= 0 {
		pct = defaultPercentageOfNodesToScore - int32(n/125)
		pct = max(pct, minFeasibleNodesPercentageToFind)
	}
	return max(n*int(pct)/100, minFeasibleNodesToFind)
}

// findFeasible filters nodes in scan order, starting where the previous
// cycle stopped, until it has enough feasible nodes or has seen them all.
// Workers take fixed chunks in order and record results per chunk; the
// merge keeps the first `want` feasible nodes in chunk order. Any chunk a
// worker claims is finished, and claiming stops only once enough were
// found, so the result does not depend on goroutine timing.
func (s *Scheduler) findFeasible(ctx context.Context, pi *PodInfo) (feasible []int32, evaluated int, st *Status) {
	scan := s.g.scanOrder()
	n := len(scan)
	for i := range s.tallies {
		s.tallies[i].reset()
		s.errs[i] = nil
	}
	if n == 0 {
		return nil, 0, nil
	}
	want := numFeasibleNodesToFind(s.opts.PercentageOfNodesToScore, n)
	chunk := s.opts.ChunkSize
	nch := (n + chunk - 1) / chunk
	if cap(s.feas) < n {
		s.feas = make([]int32, n)
	}
	if cap(s.chunkCount) < nch {
		s.chunkCount = make([]int32, nch)
	}
	s.feas, s.chunkCount = s.feas[:n], s.chunkCount[:nch]
	s.cyc = cycle{ctx: ctx, pod: pi, scan: scan, start: s.next % n, want: int32(want), chunk: chunk, nch: nch}
	s.masks, s.nodeFilters = s.masks[:0], s.nodeFilters[:0]
	for _, p := range s.fw.filter {
		if d, ok := p.(DomainFilterPlugin); ok {
			if l, v := d.FilterDomains(ctx, &s.state, pi); l >= 0 {
				// Decided per domain: no need to ask per node.
				s.masks = append(s.masks, domainMask{doms: s.g.scanDom[l], runs: s.g.scanRun[l], verdicts: v})
				continue
			}
		}
		b, _ := p.(BatchFilterPlugin)
		s.nodeFilters = append(s.nodeFilters, nodeFilter{f: p, batch: b})
	}
	s.nextChunk.Store(0)
	s.found.Store(0)
	workers := 1
	if want >= s.opts.MinParallelNodes {
		workers = s.pool.size()
	}
	s.pool.run(workers, s.filterTask)
	for _, e := range s.errs {
		if e != nil {
			return nil, 0, e
		}
	}
	claimed := min(int(s.nextChunk.Load()), nch)
	feasible = s.feasible[:0]
	last := -1
	for c := 0; c < claimed && len(feasible) < want; c++ {
		base := c * chunk
		for i := 0; i < int(s.chunkCount[c]) && len(feasible) < want; i++ {
			last = int(s.feas[base+i])
			idx := s.cyc.start + last
			if idx >= n {
				idx -= n
			}
			feasible = append(feasible, scan[idx])
		}
	}
	s.feasible = feasible
	evaluated = min(claimed*chunk, n)
	if len(feasible) == want && last >= 0 {
		s.next = (s.cyc.start + last + 1) % n
	}
	return feasible, evaluated, nil
}

// filterWorker is one goroutine's part of a filter pass. For each chunk it
// drops the nodes of rejected domains, then runs the filters plugin by
// plugin over the surviving candidates (a node leaves at its first
// rejection, as with node-by-node filtering), batching where plugins allow.
func (s *Scheduler) filterWorker(w int) {
	c := &s.cyc
	t := &s.tallies[w]
	buf := &s.bufs[w]
	n := len(c.scan)
	for s.found.Load() < c.want {
		k := int(s.nextChunk.Add(1) - 1)
		if k >= c.nch {
			return
		}
		from, to := k*c.chunk, min(k*c.chunk+c.chunk, n)
		cand := buf.cand[:0]
		for off := from; off < to; {
			idx := c.start + off
			if idx >= n {
				idx -= n
			}
			st, run := s.maskVerdict(idx)
			// Every mask verdict holds for the whole run of nodes in the
			// same domains, accepted or rejected.
			run = min(run, to-off, n-idx)
			if st != nil {
				t.addN(st, run)
			} else {
				cand = append(cand, c.scan[idx:idx+run]...)
			}
			off += run
		}
		for _, nf := range s.nodeFilters {
			if len(cand) == 0 {
				break
			}
			if nf.batch != nil {
				// The worker's own Rejections: a fresh one would escape
				// to the heap through the interface call.
				rej := &buf.rej
				rej.t, rej.err = t, nil
				cand = nf.batch.FilterNodes(c.ctx, &s.state, c.pod, cand, rej)
				if rej.err != nil {
					s.errs[w] = rej.err.WithPlugin(nf.f.Name())
					s.found.Store(c.want) // stop everyone
					return
				}
				continue
			}
			kept := cand[:0]
			for _, id := range cand {
				st := nf.f.Filter(c.ctx, &s.state, c.pod, &s.g.nodes[id])
				if st == nil {
					kept = append(kept, id)
					continue
				}
				if st.code == Error {
					s.errs[w] = st.WithPlugin(nf.f.Name())
					s.found.Store(c.want) // stop everyone
					return
				}
				if st.plugin == "" {
					st = st.WithPlugin(nf.f.Name())
				}
				t.add(st)
			}
			cand = kept
		}
		// Node IDs are scan positions (Graph.renumber), so each survivor's
		// offset from the start is its ID minus the start, mod n.
		for i, id := range cand {
			off := int(id) - c.start
			if off < 0 {
				off += n
			}
			s.feas[from+i] = int32(off)
		}
		buf.cand = cand[:0]
		s.chunkCount[k] = int32(len(cand))
		s.found.Add(int32(len(cand)))
	}
}

// nodeFilter is a filter that runs per node this cycle, with its batch
// form resolved once rather than per chunk.
type nodeFilter struct {
	f     FilterPlugin
	batch BatchFilterPlugin
}

// filterBuf is one worker's scratch for a chunk.
type filterBuf struct {
	cand []int32
	rej  Rejections
}

// domainMask is one DomainFilterPlugin's verdicts for this cycle, with the
// scan-ordered domain IDs of its level.
type domainMask struct {
	doms     []int32
	runs     []int32
	verdicts []*Status
}

// maskVerdict is the first domain rejection of the node at scan index idx
// (nil when every mask accepts it) and how many nodes from idx on get the
// same verdict: all masks consulted stay constant over the run.
func (s *Scheduler) maskVerdict(idx int) (*Status, int) {
	run := math.MaxInt32
	for i := range s.masks {
		m := &s.masks[i]
		run = min(run, int(m.runs[idx]))
		if st := m.verdicts[m.doms[idx]]; st != nil {
			return st, run
		}
	}
	return nil, run
}

// scoreAndSelect runs PreScore, Score and NormalizeScore over the feasible
// nodes and returns the node with the highest weighted total, ties broken
// by the seeded random source.
func (s *Scheduler) scoreAndSelect(ctx context.Context, pi *PodInfo, feasible []int32) (int32, *Status) {
	if st := s.prepareScores(ctx, pi, feasible); st != nil {
		return -1, st
	}
	workers := 1
	if len(feasible) >= s.opts.MinParallelNodes {
		workers = s.pool.size()
	}
	s.nextChunk.Store(0)
	s.cyc.ctx, s.cyc.pod, s.cyc.scan = ctx, pi, feasible
	s.cyc.chunk = s.opts.ChunkSize
	s.cyc.nch = (len(feasible) + s.cyc.chunk - 1) / s.cyc.chunk
	s.pool.run(workers, s.scoreTask)
	for _, e := range s.errs {
		if e != nil {
			return -1, e
		}
	}
	if st := s.normalize(ctx, pi); st != nil {
		return -1, st
	}
	best, bestScore, ties := 0, int64(-1), 0
	for i := range feasible {
		switch t := s.total[i]; {
		case t > bestScore:
			best, bestScore, ties = i, t, 1
		case t == bestScore:
			ties++
			if s.rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return feasible[best], nil
}

// prepareScores runs PreScore and sizes the score buffers of the plugins
// that did not skip.
func (s *Scheduler) prepareScores(ctx context.Context, pi *PodInfo, feasible []int32) *Status {
	s.active = s.active[:0]
	for i := range s.errs {
		s.errs[i] = nil
	}
	var skip [64]bool
	for j, p := range s.fw.preScore {
		st := p.PreScore(ctx, &s.state, pi, feasible)
		switch st.Code() {
		case Success:
		case Skip:
			if j < len(skip) {
				skip[j] = true
			}
		default:
			return st
		}
	}
	for i, sp := range s.fw.score {
		if sp.preScore >= 0 && sp.preScore < len(skip) && skip[sp.preScore] {
			continue
		}
		s.active = append(s.active, i)
		if cap(s.scores[i]) < len(feasible) {
			s.scores[i] = make([]int64, len(feasible), 2*len(feasible))
		}
		s.scores[i] = s.scores[i][:len(feasible)]
	}
	return nil
}

// scoreWorker scores chunks of feasible nodes with every active plugin.
func (s *Scheduler) scoreWorker(w int) {
	c := &s.cyc
	for {
		k := int(s.nextChunk.Add(1) - 1)
		if k >= c.nch {
			return
		}
		from, to := k*c.chunk, min(k*c.chunk+c.chunk, len(c.scan))
		for _, i := range s.active {
			sp := s.fw.score[i].p
			sc := s.scores[i]
			if b := s.fw.score[i].batch; b != nil {
				if st := b.ScoreNodes(c.ctx, &s.state, c.pod, c.scan[from:to], sc[from:to]); st != nil {
					s.errs[w] = st
					return
				}
				continue
			}
			for j := from; j < to; j++ {
				v, st := sp.Score(c.ctx, &s.state, c.pod, &s.g.nodes[c.scan[j]])
				if st != nil {
					s.errs[w] = st
					return
				}
				sc[j] = v
			}
		}
	}
}

// normalize brings each active plugin's scores into [0, MaxNodeScore] and
// sums them with their weights into s.total.
func (s *Scheduler) normalize(ctx context.Context, pi *PodInfo) *Status {
	n := len(s.cyc.scan)
	if cap(s.total) < n {
		s.total = make([]int64, n, 2*n)
	}
	s.total = s.total[:n]
	clear(s.total)
	for _, i := range s.active {
		sp := s.fw.score[i]
		sc := s.scores[i]
		if sp.ext != nil {
			if st := sp.ext.NormalizeScore(ctx, &s.state, pi, sc); st != nil {
				return st
			}
		}
		for j, v := range sc {
			if v < 0 || v > MaxNodeScore {
				return AsStatus(fmt.Errorf("plugin %s: score %d out of range [0,%d]", sp.p.Name(), v, MaxNodeScore))
			}
			s.total[j] += v * sp.weight
		}
	}
	return nil
}
