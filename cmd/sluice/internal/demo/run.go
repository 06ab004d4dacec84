package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
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
	w, err := build(ctx, opts)
	if err != nil {
		return sum, err
	}
	defer func() {
		if cerr := w.close(); cerr != nil && err == nil {
			err = cerr
		}
		if opts.Dir == "" && !opts.Keep && err == nil {
			os.RemoveAll(w.dir)
		} else if err != nil {
			fmt.Fprintf(opts.Out, "\nThe demo's files and the daemon's log are kept in %s\n", w.dir)
		}
	}()
	writeHeader(opts, w)

	s := &show{opts: opts, w: w, start: start, live: NewLive(opts.Out, ModeOf(opts.TTY)), rec: NewRecorder()}
	defer s.live.Close()
	deadline, stop := context.WithTimeout(w.ctx, opts.Timeout)
	defer stop()
	final, err := s.play(deadline)
	if err != nil {
		return sum, err
	}
	s.live.Close()

	sum = s.summary()
	fmt.Fprintln(opts.Out)
	WriteSummary(opts.Out, sum)
	switch {
	case opts.Fail && !final.Aborted:
		return sum, fmt.Errorf("%w: v2 fails %g%% of requests, yet the rollout was promoted", ErrUnexpectedOutcome, opts.FailureRate*100)
	case !opts.Fail && final.Aborted:
		return sum, fmt.Errorf("%w: the rollout was aborted: %s", ErrUnexpectedOutcome, final.Message)
	}
	if opts.Keep {
		writeKeep(opts.Out, w)
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

func writeHeader(o Options, wd *world) {
	w, repo, st := o.Out, wd.repo, wd.stage
	fail := ""
	if o.Fail {
		fail = fmt.Sprintf(" (fails %g%% of requests)", o.FailureRate*100)
	}
	fmt.Fprintf(w, "sluice demo: a canary of %s, from git push to promotion or rollback, on this machine\n", CanaryVersion)
	fmt.Fprintf(w, "  repository  %s (bare origin %s, committed with %s)\n", repo.Work, repo.Origin, repo.Tool())
	fmt.Fprintf(w, "  daemon      xDS %s, HTTP API http://%s, dashboard http://%s/ui/, log %s\n", wd.xdsAddr, wd.httpAddr, wd.httpAddr, wd.logPath)
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

func writeKeep(w io.Writer, wd *world) {
	key := api.Key{Namespace: Namespace, Name: RolloutName}
	fmt.Fprintf(w, `
Everything keeps running (Ctrl-C stops it). Watch the canary in the dashboard:
  http://%s/ui/#/r/%s/%s
Or on the command line:
  export SLUICE_SERVER=http://%s
  sluice get rollout %s --watch
  sluice promote %s        # or abort, retry, pause, resume
Push your own change from the repository:
  cd %s
  $EDITOR %s && git commit -am "my change" && git push origin HEAD:%s
The daemon polls every 2s; its log is %s. gRPC clients can dial xds:///%s with a
bootstrap whose server_uri is %s.
`, wd.httpAddr, url.PathEscape(key.Namespace), url.PathEscape(key.Name), wd.httpAddr, key.Name, key.Name, wd.repo.Work, RolloutFile, Branch, wd.logPath, Host, wd.xdsAddr)
}
