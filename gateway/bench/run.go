package main

import (
	"bufio"
	"fmt"
	"io"
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
	n            int
	recv, ack    time.Duration // medians
	memPerStream float64       // bytes
	recvs, acks  []time.Duration
}

func run(counts []int, impls []string, changes, perProc int) error {
	var results []result
	for _, n := range counts {
		for _, impl := range impls {
			r, err := runOne(strings.TrimSpace(impl), n, changes, perProc)
			if err != nil {
				return fmt.Errorf("%s n=%d: %w", impl, n, err)
			}
			fmt.Fprintf(os.Stderr, "%-6s n=%-6d recv %v ack %v (all: %v)\n", r.impl, n, r.recv, r.ack, r.acks)
			results = append(results, r)
		}
	}
	report(results)
	return nil
}

func runOne(impl string, n, changes, perProc int) (result, error) {
	res := result{impl: impl, n: n}
	srv, err := start("server", "-impl", impl)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	f, err := srv.expect("addr ", 30*time.Second)
	if err != nil {
		return res, err
	}
	addr := f[1]
	mem0, err := mem(srv)
	if err != nil {
		return res, err
	}
	var clients []*proc
	defer func() {
		for _, c := range clients {
			c.stop()
		}
	}()
	for left := n; left > 0; left -= perProc {
		k := min(left, perProc)
		c, err := start("clients", "-addr", addr, "-n", strconv.Itoa(k))
		if err != nil {
			return res, err
		}
		clients = append(clients, c)
	}
	for _, c := range clients {
		if _, err := c.expect("ready", 5*time.Minute); err != nil {
			return res, err
		}
	}
	time.Sleep(time.Second) // let connection setup settle before measuring
	mem1, err := mem(srv)
	if err != nil {
		return res, err
	}
	res.memPerStream = float64(mem1-mem0) / float64(n)
	for i := 1; i <= changes; i++ {
		fmt.Fprintf(srv.in, "set %d\n", 10+i%2*10)
		f, err := srv.expect("changed ", time.Minute)
		if err != nil {
			return res, err
		}
		t0, _ := strconv.ParseInt(f[1], 10, 64)
		var lastRecv, lastAck int64
		for _, c := range clients {
			u, err := c.expect(fmt.Sprintf("update %d ", i), time.Minute)
			if err != nil {
				return res, err
			}
			r, _ := strconv.ParseInt(u[2], 10, 64)
			a, _ := strconv.ParseInt(u[3], 10, 64)
			lastRecv, lastAck = max(lastRecv, r), max(lastAck, a)
		}
		res.recvs = append(res.recvs, time.Duration(lastRecv-t0))
		res.acks = append(res.acks, time.Duration(lastAck-t0))
		time.Sleep(300 * time.Millisecond) // idle between changes
	}
	res.recv, res.ack = median(res.recvs), median(res.acks)
	return res, nil
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
		byKey[fmt.Sprintf("%s/%d", r.impl, r.n)] = r
	}
	fmt.Println("| N | impl | change → last receive | change → last ACK | vs stock (ACK) | vs floor (ACK) | memory / idle stream |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rs {
		ratio := func(base string) string {
			b, ok := byKey[fmt.Sprintf("%s/%d", base, r.n)]
			if !ok || r.ack == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f×", float64(b.ack)/float64(r.ack))
		}
		fmt.Printf("| %d | %s | %v | %v | %s | %s | %.1f KiB |\n", r.n, r.impl,
			r.recv.Round(100*time.Microsecond), r.ack.Round(100*time.Microsecond), ratio("stock"), ratio("floor"), r.memPerStream/1024)
	}
}
