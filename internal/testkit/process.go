package testkit

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// ProcessOptions say how to start one server binary.
type ProcessOptions struct {
	// Name is used in messages, e.g. "prometheus".
	Name string
	// Binary is the executable's path.
	Binary string
	// Args returns the command line for the loopback address (host:port)
	// the process must listen on. It is called again for every attempt,
	// so it may create a fresh data directory each time.
	Args func(addr string) []string
	// ReadyPath is the URL path that answers 200 once the process serves,
	// e.g. "/-/ready".
	ReadyPath string
	// ReadyTimeout bounds the wait for ReadyPath; 30s when zero.
	ReadyTimeout time.Duration
}

// Process is a server binary running on a loopback port.
type Process struct {
	// Addr is host:port; URL is "http://" + Addr.
	Addr, URL string
	// Output is the process's stdout and stderr.
	Output *SyncBuffer

	stopOnce sync.Once
	stopFn   func()
}

// startAttempts is how often StartProcess tries: a free port is picked,
// released and handed to the process, so another process can take it in
// between.
const startAttempts = 3

// StartProcess runs the binary on a free loopback port until the test ends
// (or Stop), and returns once it answers ReadyPath. If it cannot be
// started the test fails; its output is logged when the test has failed.
func StartProcess(t testing.TB, opts ProcessOptions) *Process {
	t.Helper()
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	var errs []error
	for range startAttempts {
		p, err := startProcess(opts)
		if err == nil {
			t.Cleanup(func() {
				p.Stop()
				if t.Failed() {
					t.Logf("%s output:\n%s", opts.Name, p.Output.String())
				}
			})
			return p
		}
		errs = append(errs, err)
	}
	t.Fatalf("start %s: %v", opts.Name, errors.Join(errs...))
	return nil
}

// Stop kills the process now and waits for it to exit; later requests
// fail with connection refused.
func (p *Process) Stop() { p.stopOnce.Do(p.stopFn) }

func startProcess(opts ProcessOptions) (*Process, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	out := &SyncBuffer{}
	cmd := exec.Command(opts.Binary, opts.Args(addr)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", opts.Binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p := &Process{Addr: addr, URL: "http://" + addr, Output: out}
	p.stopFn = func() {
		_ = cmd.Process.Kill()
		err := <-exited
		exited <- err // later readers see the exit too
	}
	deadline := time.Now().Add(opts.ReadyTimeout)
	for !answers(p.URL + opts.ReadyPath) {
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("%s exited: %v: %s", opts.Name, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not ready on %s after %s: %s", opts.Name, addr, opts.ReadyTimeout, out.String())
		}
		time.Sleep(50 * time.Millisecond) // a poll interval: nothing to wait on but the port
	}
	return p, nil
}

// answers reports whether GET url returns 200.
func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
