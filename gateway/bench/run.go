package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// proc is a child process spoken to line by line.
type proc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func start(args ...string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", args, err)
	}
	p := &proc{cmd: cmd, in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// expect waits for a line starting with prefix and returns its fields.
func (p *proc) expect(prefix string, timeout time.Duration) ([]string, error) {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return nil, fmt.Errorf("process exited waiting for %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l), nil
			}
		case <-deadline:
			return nil, fmt.Errorf("timed out waiting for %q", prefix)
		}
	}
}

func (p *proc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

type result struct {
	impl         string
	xds          string // sotw or delta
	n            int
	recv, ack    time.Duration // medians
	best         time.Duration // fastest change → last ACK
	memPerStream float64       // bytes
	recvs, acks  []time.Duration
}

func run(counts []int, impls []string, deltas []bool, changes, perProc int) error {
	var results []result
	for _, n := range counts {
		for _, delta := range deltas {
			rs, err := runN(impls, n, delta, changes, perProc)
			if err != nil {
				return fmt.Errorf("n=%d %s: %w", n, variant(delta), err)
			}
			results = append(results, rs...)
		}
	}
	report(results)
	return nil
}

// target is one server process and its client processes.
type target struct {
	res     result
	srv     *proc
	clients []*proc
	changes int
}

func (t *target) stop() {
	for _, c := range t.clients {
		c.stop()
	}
	t.srv.stop()
}

// runN measures every implementation at n streams. All of them are up at
// once (idle streams cost no CPU) and the changes are interleaved, in a
// shuffled order per round, so load from anything else on the machine hits
// all implementations alike.
func runN(impls []string, n int, delta bool, changes, perProc int) ([]result, error) {
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()
	for _, impl := range impls {
		t, err := setup(strings.TrimSpace(impl), n, delta, perProc)
		if t != nil {
			targets = append(targets, t)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", impl, err)
		}
	}
	for round := 1; round <= changes; round++ {
		order := rand.Perm(len(targets))
		for _, i := range order {
			if err := targets[i].change(round); err != nil {
				return nil, fmt.Errorf("%s: %w", targets[i].res.impl, err)
			}
			time.Sleep(200 * time.Millisecond) // idle between changes
		}
	}
	var out []result
	for _, t := range targets {
		t.res.recv, t.res.ack = median(t.res.recvs), median(t.res.acks)
		t.res.best = slices.Min(t.res.acks)
		fmt.Fprintf(os.Stderr, "%-6s %-5s n=%-6d median recv %v ack %v (acks: %v)\n", t.res.impl, t.res.xds, n, t.res.recv, t.res.ack, t.res.acks)
		out = append(out, t.res)
	}
	return out, nil
}

// variant names a client stream's xDS variant.
func variant(delta bool) string {
	if delta {
		return "delta"
	}
	return "sotw"
}

func setup(impl string, n int, delta bool, perProc int) (*target, error) {
	srv, err := start("server", "-impl", impl)
	if err != nil {
		return nil, err
	}
	t := &target{res: result{impl: impl, xds: variant(delta), n: n}, srv: srv}
	f, err := srv.expect("addr ", 30*time.Second)
	if err != nil {
		return t, err
	}
	addr := f[1]
	mem0, err := mem(srv)
	if err != nil {
		return t, err
	}
	for left := n; left > 0; left -= perProc {
		c, err := start("clients", "-addr", addr, "-n", strconv.Itoa(min(left, perProc)), "-delta="+strconv.FormatBool(delta))
		if err != nil {
			return t, err
		}
		t.clients = append(t.clients, c)
	}
	for _, c := range t.clients {
		if _, err := c.expect("ready", 5*time.Minute); err != nil {
			return t, err
		}
	}
	time.Sleep(time.Second) // let connection setup settle before measuring
	mem1, err := mem(srv)
	if err != nil {
		return t, err
	}
	t.res.memPerStream = float64(mem1-mem0) / float64(n)
	return t, nil
}

// change publishes one weight change and records when the last stream
// received it and sent its ACK.
func (t *target) change(round int) error {
	fmt.Fprintf(t.srv.in, "set %d\n", 10+round%2*10)
	f, err := t.srv.expect("changed ", time.Minute)
	if err != nil {
		return err
	}
	t0, _ := strconv.ParseInt(f[1], 10, 64)
	var lastRecv, lastAck int64
	for _, c := range t.clients {
		u, err := c.expect(fmt.Sprintf("update %d ", round), time.Minute)
		if err != nil {
			return err
		}
		r, _ := strconv.ParseInt(u[2], 10, 64)
		a, _ := strconv.ParseInt(u[3], 10, 64)
		lastRecv, lastAck = max(lastRecv, r), max(lastAck, a)
	}
	t.res.recvs = append(t.res.recvs, time.Duration(lastRecv-t0))
	t.res.acks = append(t.res.acks, time.Duration(lastAck-t0))
	return nil
}

func mem(p *proc) (uint64, error) {
	fmt.Fprintln(p.in, "mem")
	f, err := p.expect("mem ", 30*time.Second)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[1], 10, 64)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(rs []result) {
	byKey := map[string]result{}
	for _, r := range rs {
		byKey[fmt.Sprintf("%s/%s/%d", r.impl, r.xds, r.n)] = r
	}
	fmt.Println("| N | xDS | impl | change → last receive (median) | change → last ACK (median) | best → last ACK | vs stock (median ACK) | vs floor (median ACK) | memory / idle stream |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		ratio := func(base string) string {
			b, ok := byKey[fmt.Sprintf("%s/%s/%d", base, r.xds, r.n)]
			if !ok || r.ack == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f×", float64(b.ack)/float64(r.ack))
		}
		fmt.Printf("| %d | %s | %s | %v | %v | %v | %s | %s | %.1f KiB |\n", r.n, r.xds, r.impl,
			r.recv.Round(100*time.Microsecond), r.ack.Round(100*time.Microsecond), r.best.Round(100*time.Microsecond),
			ratio("stock"), ratio("floor"), r.memPerStream/1024)
	}
}
