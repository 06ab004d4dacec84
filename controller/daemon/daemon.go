package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/kubeclient"
	"github.com/sluice-dev/sluice/controller/profiling"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/writeback"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gitwatch"
)

// Daemon is one running sluice: construct with New (which opens the store
// and binds the listeners), then Run until the context ends.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer

	store      stateStore
	gateway    *gateway.Server
	dispatcher *alert.Dispatcher
	alerts     *alertTap          // the runner's alerter: the outbox and the event stream
	writeback  *writeback.Records // what was written back to git; nil unless --git-writeback
	runner     *runner.Runner
	analysis   *analysis.Engine
	watcher    *gitwatch.Watcher
	templates  *templates
	meter      *trafficMeter
	backend    *backend
	api        *httpapi.Handler
	refused    *refusedRevisions
	kube       *kubeParts // nil in standalone mode

	xdsLis, httpLis net.Listener
	debugLis        net.Listener // nil unless DebugAddr is set
	synced          atomic.Bool  // the first revision has been applied
}

// New opens the state directory and binds the xDS and HTTP listeners, so
// their addresses are known (and a port clash is reported) before Run.
func New(opts Options) (_ *Daemon, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, log: opts.Logger, templates: newTemplates(),
		tracer: opts.Tracing.TracerProvider().Tracer(tracerName), xdsLis: opts.XDSListener}
	defer func() {
		if err != nil {
			d.close() // what was opened before the failure
		}
	}()
	d.opts.HTTPLimits = fitToFileLimit(opts.HTTPLimits, d.log)
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Kubernetes {
		// Before the first client (the state store's), so that every
		// request is counted.
		if err := kubeclient.Register(reg, d.log); err != nil {
			return nil, err
		}
	}
	if d.store, err = openStore(opts, d.log); err != nil {
		return nil, err
	}
	if err := d.build(reg); err != nil {
		return nil, err
	}
	if d.xdsLis == nil {
		if d.xdsLis, err = net.Listen("tcp", opts.XDSAddr); err != nil {
			return nil, fmt.Errorf("xds listener: %w", err)
		}
	}
	if err := d.checkXDSExposure(); err != nil {
		return nil, err
	}
	if d.httpLis = opts.HTTPListener; d.httpLis == nil {
		if d.httpLis, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
			return nil, fmt.Errorf("http listener: %w", err)
		}
	}
	if err := d.checkAPIExposure(); err != nil {
		return nil, err
	}
	if opts.DebugAddr != "" {
		if d.debugLis, err = profiling.Listen(opts.DebugAddr); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// checkAPIExposure refuses an API that anyone on the network could drive:
// a listener beyond loopback with no token, unless InsecureAPI says so,
// which is then logged loudly. It looks at the bound address, so ":8080",
// "0.0.0.0:8080" and host names that resolve off loopback are all caught.
func (d *Daemon) checkAPIExposure() error {
	if onLoopback(d.httpLis.Addr()) {
		return nil
	}
	if d.opts.APITokenFile != "" {
		if d.opts.APIReadTokenFile == "" {
			d.log.Info("the read API is open: anyone who can reach the HTTP API can read rollout statuses and follow the event stream; "+
				"--api-read-token-file requires a token for reads", "http", d.httpLis.Addr().String())
		}
		return nil
	}
	if !d.opts.InsecureAPI {
		return fmt.Errorf("http api on %s (--http-addr %q) is reachable from the network and has no token: "+
			"give --api-token-file, or bind --http-addr to 127.0.0.1, or accept the risk with --insecure-api", d.httpLis.Addr(), d.opts.HTTPAddr)
	}
	d.log.Warn("INSECURE API: --insecure-api is set and there is no --api-token-file; anyone on the network who can reach "+
		"the HTTP API can promote, abort, pause and resume rollouts", "http", d.httpLis.Addr().String())
	return nil
}

// onLoopback says whether a bound address accepts loopback connections only.
func onLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// build wires the parts together.
func (d *Daemon) build(reg *prometheus.Registry) error {
	o := d.opts
	var err error
	if d.gateway, err = gateway.New(gateway.Options{Logger: d.log, Registry: reg, EnvoyPort: o.EnvoyPort, TLS: o.XDSTLS,
		Limits: o.XDSLimits, AllowedNodes: o.XDSAllowedNodes}); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	sinks, err := alertSinks(o)
	if err != nil {
		return err
	}
	wbSinks, records, err := d.writebackSinks()
	if err != nil {
		return err
	}
	sinks, d.writeback = append(sinks, wbSinks...), records
	if d.dispatcher, err = alert.New(alert.Options{Outbox: d.store, Sinks: sinks, Logger: d.log, Registry: reg, Rate: o.AlertRate, Burst: o.AlertBurst}); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	broker := httpapi.NewBroker(httpapi.BrokerOptions{})
	d.alerts = &alertTap{outbox: d.dispatcher, broker: broker}
	d.meter = newTrafficMeter(d.gateway, reg)
	var xds runner.Traffic = d.meter
	if o.WrapGateway != nil {
		xds = o.WrapGateway(xds)
	}
	xds = previewTraffic{next: xds}
	traffic := xds
	var workloads runner.Workloads
	if o.Kubernetes {
		if d.kube, err = newKubeParts(o, xds, reg, d.log); err != nil {
			return err
		}
		traffic, workloads = d.kube.routed, clusterWorkloads{d.kube}
	}
	engine, err := newAnalysisEngine(o, reg, d.log, d.kube)
	if err != nil {
		return err
	}
	d.analysis = engine
	if d.runner, err = runner.New(runner.Options{
		Store:      d.store,
		Traffic:    traffic,
		Workloads:  workloads,
		Analyzer:   &analyzer{engine: engine, templates: d.templates, homeCluster: d.homeCluster()},
		Alerter:    d.alerts,
		Logger:     d.log,
		AckTimeout: o.AckTimeout,
		Tracing:    o.Tracing,
		Limits: runner.Limits{
			MaxConcurrent:             o.MaxConcurrentCanaries,
			MaxConcurrentPerNamespace: o.MaxConcurrentCanariesPerNamespace,
		},
	}); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if d.kube != nil {
		d.kube.runner.Store(d.runner)
		d.kube.waves = newWaveLoop(d.runner, d.kube.unreachable, d.log)
	}
	reg.MustRegister(newRolloutCollector(d.runner.Gauges, d.homeCluster()))
	d.refused = newRefusedRevisions(reg)
	lastCommit, err := d.store.LastCommit()
	if err != nil {
		return fmt.Errorf("read last commit: %w", err)
	}
	secret, err := readSecret(o.WebhookSecretFile)
	if err != nil {
		return err
	}
	if d.watcher, err = gitwatch.New(gitwatch.Options{
		Repo: o.Repo, Branch: o.Branch, Path: o.Path, CacheDir: filepath.Join(o.StateDir, "git"),
		Interval: o.Interval, Timeout: o.GitTimeout, Auth: o.GitAuth, WebhookSecret: secret, LastCommit: lastCommit,
		// Templates live in git, not in the store: after a restart the
		// commit in force is read again before anything newer.
		ReplayLast:      true,
		Limits:          o.StrategyLimits,
		Tree:            o.GitTree,
		Mode:            o.mode(),
		WatchNamespaces: o.WatchNamespaces,
		Logger:          d.log, Registry: reg,
	}); err != nil {
		return fmt.Errorf("gitwatch: %w", err)
	}
	d.backend = &backend{runner: d.runner, broker: broker, kube: d.kube, writeback: d.writeback, clients: d.gateway}
	apiOpts, err := o.APIAccess(httpapi.Options{Backend: d.backend, Ready: d.ready, Registry: reg, Hook: d.watcher.Handler(), Logger: d.log})
	if err != nil {
		return err
	}
	if d.api, err = httpapi.New(apiOpts); err != nil {
		return fmt.Errorf("http api: %w", err)
	}
	return nil
}

func alertSinks(o Options) ([]alert.Sink, error) {
	specs, err := alertSinkSpecs(o)
	if err != nil {
		return nil, err
	}
	var sinks []alert.Sink
	for _, s := range specs {
		s.Timeout = o.AlertTimeout
		sink, err := alert.NewSink(s)
		if err != nil {
			// The error names the sink by kind and redacted URL.
			return nil, fmt.Errorf("alert sink: %w", err)
		}
		sinks = append(sinks, sink)
	}
	return sinks, nil
}

func readSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

// XDSAddr and HTTPAddr are the bound listener addresses.
func (d *Daemon) XDSAddr() net.Addr  { return d.xdsLis.Addr() }
func (d *Daemon) HTTPAddr() net.Addr { return d.httpLis.Addr() }

// Runner exposes the runner to in-process users (the demo's live view).
func (d *Daemon) Runner() *runner.Runner { return d.runner }

func (d *Daemon) ready() error {
	if !d.synced.Load() {
		return errors.New("first git sync not done")
	}
	return nil
}

// Run serves until ctx ends, then shuts down in order: stop taking git
// changes and API calls, let the runner finish persisting, close xDS
// streams, close the store.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	if d.kube != nil {
		// Restored traffic must find its endpoints in the caches.
		if err := d.kube.workloads.Start(ctx); err != nil {
			return fmt.Errorf("start workloads: %w", err)
		}
		if err := d.kube.refs.Start(ctx); err != nil {
			return fmt.Errorf("start workloadRef resolver: %w", err)
		}
		d.kube.connectRemotes(ctx, d.opts, d.log)
	}
	if err := d.runner.Start(ctx); err != nil {
		return fmt.Errorf("start runner: %w", err)
	}

	// Serve xDS only once the restored rollouts have republished their
	// traffic: a client that reconnects earlier would be told its listener
	// is gone and drop its last good routes.
	restore, cancelRestore := context.WithTimeout(ctx, 30*time.Second)
	if err := d.runner.WaitIdle(restore); err != nil {
		d.log.Warn("restored rollouts not settled before serving xDS", "err", err)
	}
	cancelRestore()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16) // one per run below, with room
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("xds", func(ctx context.Context) error { return d.gateway.Serve(ctx, d.xdsLis) })
	run("alerts", d.dispatcher.Run)
	run("http", d.serveHTTP)
	run("git", d.followGit)
	run("store", d.watchStore)
	run("memory", func(ctx context.Context) error { return releaseAfterLoads(ctx, d.log) })
	if d.kube != nil {
		run("scheduler", d.kube.runBinder)
		run("routes", d.kube.runRouters)
		run("workloadref", d.kube.refScaler.run)
		run("waves", d.kube.waves.run)
		run("cluster health", d.kube.runHealth)
	}
	if d.debugLis != nil {
		run("debug", func(ctx context.Context) error { return profiling.Serve(ctx, d.debugLis) })
		d.log.Info("pprof serving", "addr", d.debugLis.Addr().String())
	}
	wg.Add(1)
	go func() { defer wg.Done(); d.backend.pumpStatus(ctx) }()
	d.log.Info("sluice running", "repo", d.watcher.Status().Repo, "xds", d.XDSAddr().String(), "http", d.HTTPAddr().String())
	<-ctx.Done()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := d.runner.Close(); err != nil {
			d.log.Warn("close runner", "err", err)
		}
		wg.Wait()
	}()
	d.awaitShutdown(stopped)
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// storeFailedShutdown bounds the shutdown after the store failed.
const storeFailedShutdown = 10 * time.Second

// awaitShutdown waits for stopped; after a store failure only for a while:
// a writer that was already waiting for bbolt's write lock when bbolt
// panicked may wait forever, and the process must exit all the same (a
// restart refuses the damaged file and says how to recover).
func (d *Daemon) awaitShutdown(stopped <-chan struct{}) {
	select {
	case <-stopped:
		return
	case <-d.store.Failed():
	}
	t := time.NewTimer(storeFailedShutdown)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		d.log.Error("shutdown after the store failure did not finish; exiting anyway", "waited", storeFailedShutdown)
	}
}

// watchStore ends the daemon when the store has failed for good (bbolt
// panicked on a damaged file): every write would be refused, so carrying
// on would only look healthy.
func (d *Daemon) watchStore(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-d.store.Failed():
		return fmt.Errorf("state store failed: %w", d.store.Err())
	}
}

func (d *Daemon) serveHTTP(ctx context.Context) error {
	srv := d.api.NewServer()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(d.api.LimitConnections(srv, d.httpLis)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// followGit applies every Revision in order and records each commit as
// processed once the runner has persisted what it caused.
func (d *Daemon) followGit(ctx context.Context) error {
	revs := make(chan gitwatch.Revision)
	watchErr := make(chan error, 1)
	go func() { watchErr <- d.watcher.Run(ctx, revs) }()
	// last is the last commit applied: a change of a Deployment that its
	// workloadRef rollouts reference applies it again (workloadref.go).
	var last gitwatch.Revision
	for {
		select {
		case err := <-watchErr:
			return err
		case <-d.refChanges():
			if last.Set != nil {
				d.reevaluate(ctx, last)
			}
		case rev := <-revs:
			if err := d.applyTraced(ctx, rev); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// The commit stays unprocessed: a restart applies it again.
				d.log.Error("apply revision", "commit", short(rev.Commit), "err", err)
				continue
			}
			if err := d.store.SetLastCommit(rev.Commit); err != nil {
				d.log.Error("record processed commit", "commit", short(rev.Commit), "err", err)
			}
			if !rev.Set.Refused {
				last = rev
				if rev.Replay && len(rev.Set.WorkloadRefs()) > 0 {
					// A replay does not diff: a Deployment changed while
					// sluice was down shows only in a re-evaluation.
					d.kube.signalRefChange()
				}
			}
			d.synced.Store(true)
			d.log.Info("revision applied", "commit", short(rev.Commit), "changed", rev.Changed, "forcePush", rev.ForcePush, "rollouts", len(rev.Set.Rollouts), "errors", len(rev.Set.Diagnostics.Errors()))
		}
	}
}

func (d *Daemon) close() {
	for _, l := range []net.Listener{d.xdsLis, d.httpLis, d.debugLis} {
		if l != nil {
			_ = l.Close()
		}
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Warn("close store", "err", err)
		}
	}
}

// checkXDSExposure refuses a bound xDS listener beyond loopback without
// mutual TLS unless InsecureXDS says so (Options.checkXDSExposure checked
// the address as given; this catches host names that resolve off
// loopback), and warns loudly when InsecureXDS lets one through.
func (d *Daemon) checkXDSExposure() error {
	bound := d.xdsLis.Addr()
	if onLoopback(bound) || d.opts.xdsMutualTLS() {
		return nil
	}
	if err := d.opts.checkXDSExposure(false, bound.String()); err != nil {
		return err
	}
	d.log.Warn("INSECURE XDS: --insecure-xds is set and xDS is reachable from the network without mutual TLS; anyone who can connect "+
		"reads every rollout's routes and can NACK them to hold a canary", "xds", bound.String(), "tls", d.opts.XDSTLS.CertFile != "")
	return nil
}
