package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// Options configures a demo run.
type Options struct {
	// Out receives the live view and the summary; TTY redraws in place.
	Out io.Writer
	TTY bool
	// Fail makes v2 fail FailureRate of its requests, so analysis fails
	// and the rollout rolls back.
	Fail bool
	// Keep leaves everything running after the summary until ctx ends.
	Keep bool
	// Speed divides the strategy's durations (default 1).
	Speed float64
	// Rate is the load in requests/s (default 200) over Clients gRPC xDS
	// clients (default 4); TestersShare of it carries the testers header
	// (default 0.1).
	Rate         float64
	Clients      int
	TestersShare float64
	// FailureRate is v2's failure share with Fail (default 0.2).
	FailureRate float64
	// Timeout bounds the whole run before Keep (default 2m).
	Timeout time.Duration
	// Dir holds the repository, state and logs; "" makes a temporary
	// directory, removed at the end unless Keep is set or the run failed.
	Dir string
	// GoGit commits with go-git even when git is installed.
	GoGit bool
}

func (o *Options) defaults() {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.TestersShare <= 0 {
		o.TestersShare = 0.1
	}
	if o.FailureRate <= 0 {
		o.FailureRate = 0.2
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
}

// ErrUnexpectedOutcome is returned when the rollout ended other than the
// demo meant: Degraded without --fail, or promoted with it.
var ErrUnexpectedOutcome = errors.New("unexpected rollout outcome")

// refresh is how often the live view is redrawn.
const refresh = 250 * time.Millisecond

// Run plays the demo: stage, repository, daemon, load, push of v2, live
// view until the rollout is Healthy on v2 or Degraded, then the summary.
func Run(ctx context.Context, opts Options) (sum Summary, err error) {
	opts.defaults()
	start := time.Now()
	dir, err := workDir(opts.Dir)
	if err != nil {
		return sum, err
	}
	defer func() {
		if opts.Dir == "" && !opts.Keep && err == nil {
			os.RemoveAll(dir)
		} else if err != nil {
			fmt.Fprintf(opts.Out, "\nThe demo's files and the daemon's log are kept in %s\n", dir)
		}
	}()
	logFile, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		return sum, fmt.Errorf("daemon log: %w", err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	runCtx, cancel := context.WithCancel(ctx)
	var wait []func() error // stop in reverse order of start
	defer func() {
		cancel()
		for i := len(wait) - 1; i >= 0; i-- {
			if werr := wait[i](); werr != nil && err == nil {
				err = werr
			}
		}
	}()

	failure := map[string]float64{}
	if opts.Fail {
		failure[CanaryVersion] = opts.FailureRate
	}
	// The backends' /stats window follows the analysis interval, so each
	// measurement sees mostly fresh requests.
	st, err := startStage(runCtx, failure, max(2*time.Second, 2*analysisInterval/time.Duration(opts.Speed)))
	if err != nil {
		return sum, err
	}
	wait = append(wait, st.wait)
	strategy := st.strategy(opts.Speed)

	repo, err := NewRepo(ctx, RepoOptions{Dir: filepath.Join(dir, "repo"), GoGit: opts.GoGit})
	if err != nil {
		return sum, err
	}
	if _, err := commitVersion(ctx, repo, strategy, StableVersion); err != nil {
		return sum, err
	}
	secretFile, secret, err := writeSecret(dir)
	if err != nil {
		return sum, err
	}
	d, err := daemon.New(daemon.Options{
		Repo: repo.Origin, Branch: Branch, Interval: 2 * time.Second,
		StateDir: filepath.Join(dir, "state"), XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		WebhookSecretFile: secretFile, AlertWebhooks: []string{st.sinkURL}, Logger: logger,
	})
	if err != nil {
		return sum, fmt.Errorf("start daemon: %w", err)
	}
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Run(runCtx) }()
	wait = append(wait, func() error {
		if err := <-daemonDone; err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		return nil
	})
	httpAddr, xdsAddr := d.HTTPAddr().String(), d.XDSAddr().String()
	cl, err := client.New(client.Options{Server: "http://" + httpAddr, Timeout: 5 * time.Second})
	if err != nil {
		return sum, err
	}
	lg, err := probe.NewLoadGen(probe.LoadOptions{
		XDSServer: xdsAddr, Host: Host, Clients: opts.Clients, Rate: opts.Rate, Window: 5 * time.Second,
		Classes:    []probe.Class{{Name: TestersClass, Share: opts.TestersShare, Metadata: []string{HeaderName, HeaderValue}}},
		NodePrefix: "demo-client",
	})
	if err != nil {
		return sum, err
	}
	writeHeader(opts, repo, st, httpAddr, xdsAddr, logFile.Name())

	s := &show{opts: opts, start: start, cl: cl, lg: lg, sink: st.sink, live: NewLive(opts.Out, opts.TTY), rec: NewRecorder(), daemonDone: daemonDone}
	defer s.live.Close()
	deadline, stop := context.WithTimeout(runCtx, opts.Timeout)
	defer stop()

	// 1. The daemon syncs v1: stable at 100 %.
	if _, err := s.until(deadline, "waiting for the daemon's first sync", func(r *httpapi.RolloutStatus) bool {
		return r != nil && r.Phase == rollout.PhaseHealthy && r.StableVersion == StableVersion
	}); err != nil {
		return sum, err
	}
	// 2. Load through the xDS clients; let the audience see v1 answer.
	loadDone := make(chan error, 1)
	go func() { loadDone <- lg.Run(runCtx) }()
	wait = append(wait, func() error { return <-loadDone })
	loadStage := fmt.Sprintf("sending %g requests/s to xds:///%s", opts.Rate, Host)
	if _, err := lg.WaitFirst(deadline, StableVersion); err != nil {
		return sum, fmt.Errorf("load generator never reached %s: %w", StableVersion, err)
	}
	if err := s.hold(deadline, loadStage, 2*time.Second); err != nil {
		return sum, err
	}
	// 3. Push v2 and follow the rollout to its end.
	commit, err := commitVersion(ctx, repo, strategy, CanaryVersion)
	if err != nil {
		return sum, err
	}
	pushed := time.Now()
	s.rec.Pushed(pushed)
	pushStage := fmt.Sprintf("pushed %s (commit %s, %s)", CanaryVersion, shortSHA(commit), repo.Tool())
	if err := pokeWebhook(deadline, httpAddr, secret); err != nil {
		pushStage += "; webhook failed, waiting for the poll: " + err.Error()
	}
	final, err := s.until(deadline, pushStage, func(r *httpapi.RolloutStatus) bool {
		return r != nil && r.Commit == commit && settled(r)
	})
	if err != nil {
		return sum, err
	}
	ended := time.Now()
	// 4. Show the result in traffic: a fresh window, and the alert.
	lg.ResetWindow()
	endStage := fmt.Sprintf("promoted: %s takes all traffic", CanaryVersion)
	if final.Aborted {
		endStage = fmt.Sprintf("rolled back: all traffic is back on %s", final.StableVersion)
	}
	settle := max(1500*time.Millisecond, 3*time.Second/time.Duration(opts.Speed))
	resetAgain := true
	if _, err := s.until(deadline, endStage, func(*httpapi.RolloutStatus) bool {
		// The status can show the end a moment before every client has
		// the new routes: calls routed before then are not the result.
		if resetAgain && time.Since(ended) > 500*time.Millisecond {
			lg.ResetWindow()
			resetAgain = false
		}
		if time.Since(ended) < settle {
			return false
		}
		return !final.Aborted || hasAlert(st.sink.Alerts(), alert.EventRolloutAborted) || time.Since(ended) > 10*time.Second
	}); err != nil {
		return sum, err
	}
	s.live.Close()

	sum = s.rec.Summary()
	sum.Commit, sum.Tool = commit, repo.Tool()
	sum.PushToEnd = ended.Sub(pushed)
	if first, ok := lg.FirstSeen(CanaryVersion); ok {
		sum.PushToCanary = first.Sub(pushed)
	}
	sum.Alerts = st.sink.Alerts()
	sum.Observed = lg.Observe()
	fmt.Fprintln(opts.Out)
	WriteSummary(opts.Out, sum)

	switch {
	case opts.Fail && !final.Aborted:
		return sum, fmt.Errorf("%w: v2 fails %g%% of requests, yet the rollout was promoted", ErrUnexpectedOutcome, opts.FailureRate*100)
	case !opts.Fail && final.Aborted:
		return sum, fmt.Errorf("%w: the rollout was aborted: %s", ErrUnexpectedOutcome, final.Message)
	}
	if opts.Keep {
		writeKeep(opts.Out, repo, httpAddr, xdsAddr, logFile.Name())
		<-ctx.Done()
	}
	return sum, nil
}

// settled: the rollout reached an end, promoted or aborted.
func settled(r *httpapi.RolloutStatus) bool {
	switch {
	case r.Phase == rollout.PhaseHealthy && r.CanaryVersion == "" && r.StableVersion == CanaryVersion:
		return true
	case r.Phase == rollout.PhaseDegraded && r.Aborted:
		return true
	}
	return false
}

func hasAlert(as []Received, ev alert.Event) bool {
	for _, a := range as {
		if a.Event == ev {
			return true
		}
	}
	return false
}

func commitVersion(ctx context.Context, repo *Repo, s Strategy, version string) (string, error) {
	files, err := s.Files(version)
	if err != nil {
		return "", err
	}
	return repo.Commit(ctx, files, "deploy "+version)
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
func writeSecret(dir string) (string, []byte, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("webhook secret: %w", err)
	}
	secret := []byte(hex.EncodeToString(b))
	path := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		return "", nil, fmt.Errorf("webhook secret: %w", err)
	}
	return path, secret, nil
}

func writeHeader(o Options, repo *Repo, st *stage, httpAddr, xdsAddr, logPath string) {
	w := o.Out
	fail := ""
	if o.Fail {
		fail = fmt.Sprintf(" (fails %g%% of requests)", o.FailureRate*100)
	}
	fmt.Fprintf(w, "sluice demo: a canary of %s, from git push to promotion or rollback, on this machine\n", CanaryVersion)
	fmt.Fprintf(w, "  repository  %s (bare origin %s, committed with %s)\n", repo.Work, repo.Origin, repo.Tool())
	fmt.Fprintf(w, "  daemon      xDS %s, HTTP API http://%s, log %s\n", xdsAddr, httpAddr, logPath)
	fmt.Fprintf(w, "  backends    %s on %s, %s on %s%s\n", StableVersion, st.backends[StableVersion].grpcAddr,
		CanaryVersion, st.backends[CanaryVersion].grpcAddr, fail)
	fmt.Fprintf(w, "  load        %g requests/s from %d gRPC xDS clients to xds:///%s, %g%% with %s: %s\n",
		o.Rate, o.Clients, Host, o.TestersShare*100, HeaderName, HeaderValue)
	fmt.Fprintf(w, "  alerts      webhook sink at %s\n", st.sinkURL)
	fmt.Fprintf(w, "  strategy    %s\n\n", strings.Join(stepNames(st.strategy(o.Speed)), " → "))
}

func stepNames(s Strategy) []string {
	return []string{"setWeight 10", "header route testers", "analysis success-rate", "setWeight 50",
		"pause " + s.scaled(pauseDuration), "analysis success-rate", "promote"}
}

func writeKeep(w io.Writer, repo *Repo, httpAddr, xdsAddr, logPath string) {
	key := api.Key{Namespace: Namespace, Name: RolloutName}
	fmt.Fprintf(w, `
Everything keeps running (Ctrl-C stops it). Try:
  export SLUICE_SERVER=http://%s
  sluice get rollout %s --watch
  sluice promote %s        # or abort, retry, pause, resume
Push your own change from the repository:
  cd %s
  $EDITOR %s && git commit -am "my change" && git push origin HEAD:%s
The daemon polls every 2s; its log is %s. gRPC clients can dial xds:///%s with a
bootstrap whose server_uri is %s.
`, httpAddr, key.Name, key.Name, repo.Work, RolloutFile, Branch, logPath, Host, xdsAddr)
}
