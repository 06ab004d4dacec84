package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// world is everything the demo runs: the stage (backends, alert sink),
// the repository, the daemon and the load generator, stopped by close in
// the reverse order of their start.
type world struct {
	dir      string
	logPath  string
	stage    *stage
	repo     *Repo
	strategy Strategy
	secret   []byte // the webhook secret the daemon verifies
	httpAddr string
	xdsAddr  string
	api      *client.Client
	load     *probe.LoadGen

	ctx        context.Context // ends everything started
	cancel     context.CancelFunc
	daemonDone chan error
	stops      []func() error
	logFile    *os.File
}

// build starts the stage and the daemon (syncing v1) and prepares the load
// generator; the show starts the load when the daemon serves v1.
func build(ctx context.Context, opts Options) (w *world, err error) {
	w = &world{daemonDone: make(chan error, 1)}
	w.ctx, w.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			_ = w.close()
		}
	}()
	if w.dir, err = workDir(opts.Dir); err != nil {
		return w, err
	}
	w.logPath = filepath.Join(w.dir, "sluice.log")
	if w.logFile, err = os.Create(w.logPath); err != nil {
		return w, fmt.Errorf("daemon log: %w", err)
	}
	failure := map[string]float64{}
	if opts.Fail {
		failure[CanaryVersion] = opts.FailureRate
	}
	// The backends' /stats window follows the analysis interval, so each
	// measurement sees mostly fresh requests.
	if w.stage, err = startStage(w.ctx, failure, max(2*time.Second, 2*analysisInterval/time.Duration(opts.Speed))); err != nil {
		return w, err
	}
	w.stops = append(w.stops, w.stage.wait)
	w.strategy = w.stage.strategy(opts.Speed)
	if w.repo, err = NewRepo(ctx, RepoOptions{Dir: filepath.Join(w.dir, "repo"), GoGit: opts.GoGit}); err != nil {
		return w, err
	}
	if _, err = w.commit(ctx, StableVersion); err != nil {
		return w, err
	}
	if err = w.startDaemon(); err != nil {
		return w, err
	}
	if w.api, err = client.New(client.Options{Server: "http://" + w.httpAddr, Timeout: 5 * time.Second}); err != nil {
		return w, err
	}
	w.load, err = probe.NewLoadGen(probe.LoadOptions{
		XDSServer: w.xdsAddr, Host: Host, Clients: opts.Clients, Rate: opts.Rate, Window: 5 * time.Second,
		Classes:    []probe.Class{{Name: TestersClass, Share: opts.TestersShare, Metadata: []string{HeaderName, HeaderValue}}},
		NodePrefix: "demo-client",
	})
	return w, err
}

// startDaemon runs the daemon in-process on loopback ports, with an
// embedded store in the demo directory, the sink as its alert webhook, and
// a webhook secret so pushes are fetched at once.
func (w *world) startDaemon() error {
	secretFile, err := w.writeSecret()
	if err != nil {
		return err
	}
	d, err := daemon.New(daemon.Options{
		Repo: w.repo.Origin, Branch: Branch, Interval: 2 * time.Second,
		StateDir: filepath.Join(w.dir, "state"), XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		WebhookSecretFile: secretFile, AlertWebhooks: []string{w.stage.sinkURL},
		// The demo's analysis reads the canary backend's /stats on
		// loopback, which web metrics may not reach by default.
		AnalysisAllowHosts: []string{"127.0.0.1"},
		Logger:             slog.New(slog.NewTextHandler(w.logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	w.httpAddr, w.xdsAddr = d.HTTPAddr().String(), d.XDSAddr().String()
	go func() { w.daemonDone <- d.Run(w.ctx) }()
	w.stops = append(w.stops, func() error {
		if err := <-w.daemonDone; err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		return nil
	})
	return nil
}

// startLoad runs the load generator until the world closes.
func (w *world) startLoad() {
	done := make(chan error, 1)
	go func() { done <- w.load.Run(w.ctx) }()
	w.stops = append(w.stops, func() error { return <-done })
}

// commit writes the strategy declaring version, commits and pushes it.
func (w *world) commit(ctx context.Context, version string) (string, error) {
	files, err := w.strategy.Files(version)
	if err != nil {
		return "", err
	}
	return w.repo.Commit(ctx, files, "deploy "+version)
}

// close stops everything and returns the first error a part reported.
func (w *world) close() error {
	w.cancel()
	var first error
	for i := len(w.stops) - 1; i >= 0; i-- {
		if err := w.stops[i](); err != nil && first == nil {
			first = err
		}
	}
	w.stops = nil
	if w.logFile != nil {
		w.logFile.Close()
	}
	return first
}

func workDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-demo-")
		if err != nil {
			return "", fmt.Errorf("demo directory: %w", err)
		}
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo directory: %w", err)
	}
	return dir, nil
}

// writeSecret makes the webhook secret the daemon verifies pushes with.
func (w *world) writeSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	w.secret = []byte(hex.EncodeToString(b))
	path := filepath.Join(w.dir, "webhook-secret")
	if err := os.WriteFile(path, w.secret, 0o600); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return path, nil
}
