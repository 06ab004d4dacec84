package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildSluice builds ./cmd/sluice of the module this program belongs to
// into dir, as users build it (no race detector).
func buildSluice(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "sluice")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build sluice: %w\n%s", err, b)
	}
	// Written out now, so that startDaemon's eviction does not wait for
	// 146 MB to reach the disk inside the timed start.
	return bin, evictFromPageCache(bin)
}

// daemon is one `sluice run` process.
type daemon struct {
	cmd     *exec.Cmd
	pid     int
	xdsAddr string
	url     string
	secret  []byte
	logPath string
	exited  chan struct{}
	logFile *os.File
}

// startDaemon runs `sluice run` on loopback ports picked by the kernel and
// returns once it reports them (it then serves xDS and HTTP). Its log goes
// to dir/sluice.log.
func startDaemon(ctx context.Context, bin, dir string, repo *gitRepo, extra []string) (*daemon, error) {
	secret := []byte("scale-secret")
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"run",
		"--repo", repo.origin, "--branch", "main",
		"--state-dir", filepath.Join(dir, "state"),
		"--xds-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--webhook-secret-file", secretFile,
		// The analyses' web metric is this program's endpoint on loopback,
		// which sluice refuses unless allowed (docs/security.md).
		"--analysis-allow-hosts", "127.0.0.1",
		"--log-format", "json", "--log-level", "info",
	}, extra...)
	logPath := filepath.Join(dir, "sluice.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// Every start reads the binary in anew, as on a fresh node.
	if err := evictFromPageCache(bin); err != nil {
		lf.Close()
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// The daemon must not outlive this program, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = lf
	cmd.Stderr = io.MultiWriter(lf, pw)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start sluice: %w", err)
	}
	d := &daemon{cmd: cmd, pid: cmd.Process.Pid, secret: secret, logPath: logPath, exited: make(chan struct{}), logFile: lf}
	go func() { _ = cmd.Wait(); pw.Close(); close(d.exited) }()
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				XDS  string `json:"xds"`
				HTTP string `json:"http"`
			}
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "sluice running" {
				found <- [2]string{line.XDS, line.HTTP}
				sent = true
			}
		}
	}()
	select {
	case a := <-found:
		d.xdsAddr, d.url = a[0], "http://"+a[1]
		return d, nil
	case <-d.exited:
		return nil, fmt.Errorf("sluice run exited before serving; log in %s", logPath)
	case <-time.After(10 * time.Minute):
		d.stop()
		return nil, fmt.Errorf("sluice run did not report its addresses in 10m; log in %s", logPath)
	case <-ctx.Done():
		d.stop()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM, waits up to 30s, then kills.
func (d *daemon) stop() {
	defer d.logFile.Close()
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// waitReady polls /readyz until it answers 200.
func (d *daemon) waitReady(ctx context.Context) error {
	for {
		resp, err := http.Get(d.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("readyz: %w", ctx.Err())
		case <-d.exited:
			return fmt.Errorf("sluice run exited; log in %s", d.logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// postHook sends a signed generic webhook, so the daemon fetches at once.
func (d *daemon) postHook() error {
	body := []byte(`{"ref": "refs/heads/main"}`)
	mac := hmac.New(sha256.New, d.secret)
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, d.url+"/hook/generic", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

// scrape is one read of /metrics: its size, how long it took, and the
// unlabelled samples the benchmark reports.
type scrape struct {
	Bytes   int
	Took    time.Duration
	Samples map[string]float64
	Series  int
}

// allocatedBytes is what the daemon allocated since it started.
func (d *daemon) allocatedBytes() (float64, error) {
	s, err := d.scrape()
	if err != nil {
		return 0, err
	}
	v, ok := s.Samples["go_memstats_alloc_bytes_total"]
	if !ok {
		return 0, errors.New("metrics: no go_memstats_alloc_bytes_total")
	}
	return v, nil
}

func (d *daemon) scrape() (scrape, error) {
	start := time.Now()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		return scrape{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return scrape{}, fmt.Errorf("metrics: %w", err)
	}
	s := scrape{Bytes: len(body), Took: time.Since(start), Samples: map[string]float64{}}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s.Series++
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			s.Samples[name] = v
		}
	}
	return s, nil
}

// cpuTicks is the process' utime+stime in clock ticks (/proc/<pid>/stat).
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + s, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// rssBytes is VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// ackTimeouts counts the daemon's "xds ack timed out" log lines: a step
// that went on without its clients' ACK.
func (d *daemon) ackTimeouts() int {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return -1
	}
	return bytes.Count(b, []byte(`"msg":"xds ack timed out; the step goes on"`))
}
