package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/kubeclient"
	"github.com/sluice-dev/sluice/controller/replica"
	"github.com/sluice-dev/sluice/controller/tracing"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gitwatch"
)

type runOptions struct {
	daemon.Options
	configFile  string
	logFormat   string
	logLevel    string
	memoryLimit string
	gcPercent   int
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the sluice daemon: follow a repository and drive its rollouts",
		Long: `Run the daemon. It follows one branch of a git repository, diffs every commit's
strategy files, drives each rollout through its steps, serves the resulting routes over
xDS (ADS) to Envoy and proxyless gRPC clients, runs analysis, and sends alerts.

Every flag can also be set in a YAML file given with --config, using the flag names as
keys (lists for repeatable flags); flags on the command line win.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before the config file sets flags: only the command line is
			// visible to others.
			inline := secretsOnCommandLine(cmd.Flags())
			if o.configFile != "" {
				if err := applyConfigFile(cmd.Flags(), o.configFile); err != nil {
					return err
				}
			}
			logger, err := newLogger(o.logFormat, o.logLevel)
			if err != nil {
				return err
			}
			o.Logger = logger
			warnSecretsOnCommandLine(logger, inline)
			if err := applyMemoryLimit(o.memoryLimit, logger); err != nil {
				return err
			}
			if err := applyGCPercent(o.gcPercent, logger); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Traces: off unless the standard OTEL_* variables ask for them.
			tp, err := tracing.New(ctx, tracing.Options{Version: version, Logger: logger})
			if err != nil {
				return err
			}
			defer flushTraces(tp, logger)
			o.Tracing = tp
			return runDaemon(ctx, o.Options)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "repository URL or path")
	f.StringVar(&o.Branch, "branch", "", "branch to follow (default: the remote's HEAD)")
	f.StringVar(&o.Path, "path", "", "directory of strategy files in the repository (default: its root)")
	f.DurationVar(&o.Interval, "interval", 0, "poll interval (default 30s)")
	f.DurationVar(&o.GitTimeout, "git-timeout", 0, "deadline of each git operation against the remote: list, fetch, clone (default 2m)")
	f.IntVar(&o.GitTree.MaxDepth, "git-max-tree-depth", gitwatch.DefaultMaxTreeDepth, "most directories deep, from the repository root, a directory under --path may be; a commit with a deeper one is refused (-1: no limit)")
	f.IntVar(&o.GitTree.MaxPathBytes, "git-max-path-bytes", gitwatch.DefaultMaxPathBytes, "longest path under --path, in bytes from the repository root; a commit with a longer one is refused (-1: no limit)")
	f.StringVar(&o.StateDir, "state-dir", ".sluice", "directory for the store and the git cache")
	f.StringVar(&o.XDSAddr, "xds-addr", daemon.DefaultXDSAddr, "xDS (ADS) listen address; beyond loopback it needs mutual TLS (--xds-tls-cert-file, --xds-tls-key-file, --xds-client-ca-file) or --insecure-xds")
	f.BoolVar(&o.InsecureXDS, "insecure-xds", false, "allow --xds-addr beyond loopback without mutual TLS: anyone on the network can read every route and NACK to hold a canary")
	f.StringVar(&o.HTTPAddr, "http-addr", daemon.DefaultHTTPAddr, "HTTP API listen address; beyond loopback it needs --api-token-file or --insecure-api")
	f.StringVar(&o.DebugAddr, "debug-addr", "", "serve pprof at /debug/pprof/ on this loopback address, e.g. 127.0.0.1:6060 (default: off)")
	f.StringVar(&o.memoryLimit, "memory-limit", "", "soft limit of the daemon's memory, e.g. 600MiB, or off; the garbage collector works harder near it (CPU for RSS) (default: GOMEMLIMIT, else 90% of the cgroup's memory limit, else none)")
	f.IntVar(&o.gcPercent, "gc-percent", 0, "how far the heap may grow past what is live before the garbage collector runs, in percent (Go's GOGC); lower holds the RSS down for CPU (default: GOGC, else 50)")
	f.BoolVar(&o.InsecureAPI, "insecure-api", false, "allow --http-addr beyond loopback without --api-token-file: anyone on the network can promote and abort")
	lim := httpapi.DefaultLimits()
	f.DurationVar(&o.HTTPLimits.ReadHeaderTimeout, "http-read-header-timeout", lim.ReadHeaderTimeout, "time a client has to send the request headers")
	f.DurationVar(&o.HTTPLimits.ReadTimeout, "http-read-timeout", lim.ReadTimeout, "time a client has to send a whole request, body included")
	f.DurationVar(&o.HTTPLimits.WriteTimeout, "http-write-timeout", lim.WriteTimeout, "time to answer a request (event streams are exempt)")
	f.DurationVar(&o.HTTPLimits.IdleTimeout, "http-idle-timeout", lim.IdleTimeout, "how long an idle keep-alive connection stays open")
	f.IntVar(&o.HTTPLimits.MaxHeaderBytes, "http-max-header-bytes", lim.MaxHeaderBytes, "largest request line and headers, in bytes")
	f.IntVar(&o.HTTPLimits.MaxWebhooks, "http-max-webhooks", lim.MaxWebhooks, "webhooks served at once; more are answered 503")
	f.IntVar(&o.HTTPLimits.MaxEventStreams, "http-max-event-streams", lim.MaxEventStreams, "open /api/v1/events streams; more are answered 503")
	f.IntVar(&o.HTTPLimits.MaxEventStreamsPerClient, "http-max-event-streams-per-client", lim.MaxEventStreamsPerClient, "open /api/v1/events streams of one client IP address; more are answered 503 (behind a proxy every client has its address)")
	f.IntVar(&o.HTTPLimits.MaxConnections, "http-max-connections", lim.MaxConnections, "open HTTP connections (at most half the open-file limit); beyond it a new one replaces the longest-idle keep-alive connection")
	f.Uint32Var(&o.EnvoyPort, "envoy-port", 10000, "port of the sluice-http listener served to Envoy")
	f.StringVar(&o.WebhookSecretFile, "webhook-secret-file", "", "file holding the git webhook secret")
	f.StringVar(&o.APITokenFile, "api-token-file", "", "file holding the bearer token required by API write calls")
	f.StringVar(&o.APIReadTokenFile, "api-read-token-file", "", "file holding a bearer token required by the read API, the event stream and the dashboard's data (the write token is taken too; needs --api-token-file)")
	f.StringSliceVar(&o.APIAllowedHosts, "api-allowed-hosts", nil, "host names the HTTP API answers to beyond localhost, IP addresses and the host of --http-addr, e.g. sluice.example.com or *.example.com (comma-separated or repeated); other Host headers get 421")
	f.StringSliceVar(&o.APITrustedOrigins, "api-trusted-origins", nil, "origins (scheme://host[:port]) whose cross-origin write calls are taken, for a proxy that changes the Host header (comma-separated or repeated)")
	f.StringArrayVar(&o.AlertWebhooks, "alert-webhook", nil, "URL receiving alerts as JSON (repeatable); deprecated on the command line, where ps and pprof show it: use --alert-webhook-file or --config")
	f.StringVar(&o.AlertSlack, "alert-slack", "", "Slack incoming-webhook URL for alerts; deprecated on the command line, where ps and pprof show it: use --alert-slack-file or --config")
	f.StringVar(&o.AlertmanagerURL, "alertmanager-url", "", "Alertmanager base URL for alerts; deprecated on the command line, where ps and pprof show it: use --alertmanager-url-file or --config")
	f.StringArrayVar(&o.AlertWebhookFiles, "alert-webhook-file", nil, "file holding a URL receiving alerts as JSON, kept off the command line (repeatable)")
	f.StringVar(&o.AlertSlackFile, "alert-slack-file", "", "file holding the Slack incoming-webhook URL, kept off the command line")
	f.StringVar(&o.AlertmanagerURLFile, "alertmanager-url-file", "", "file holding the Alertmanager base URL, kept off the command line")
	f.DurationVar(&o.AlertTimeout, "alert-timeout", alert.DefaultTimeout, "bound on one alert delivery attempt; a timed-out attempt is retried with back-off")
	f.Float64Var(&o.AlertRate, "alert-rate", alert.DefaultRate, "requests per second to each alert sink, so that an alert storm is spread out (negative: unlimited); a 429 with Retry-After pauses that sink")
	f.IntVar(&o.AlertBurst, "alert-burst", alert.DefaultBurst, "requests an alert sink may get at once before --alert-rate applies")
	f.StringVar(&o.XDSTLS.CertFile, "xds-tls-cert-file", "", "TLS certificate (PEM) of the xDS listener")
	f.StringVar(&o.XDSTLS.KeyFile, "xds-tls-key-file", "", "TLS private key (PEM) of the xDS listener")
	f.StringVar(&o.XDSTLS.ClientCAFile, "xds-client-ca-file", "", "CA bundle (PEM) xDS clients' certificates must chain to (mutual TLS); a client's node id must then match its certificate's identity")
	addDeprecatedAlias(f, "xds-tls-cert", "xds-tls-cert-file", &o.XDSTLS.CertFile)
	addDeprecatedAlias(f, "xds-tls-key", "xds-tls-key-file", &o.XDSTLS.KeyFile)
	addDeprecatedAlias(f, "xds-client-ca", "xds-client-ca-file", &o.XDSTLS.ClientCAFile)
	f.StringSliceVar(&o.XDSAllowedNodes, "xds-allowed-nodes", nil, "xDS node ids allowed to connect, as path.Match globs (comma-separated or repeated; default: all)")
	f.Uint32Var(&o.XDSLimits.StreamsPerConnection, "xds-max-streams-per-connection", gateway.DefaultLimits.StreamsPerConnection, "xDS streams on one connection (HTTP/2 MAX_CONCURRENT_STREAMS)")
	f.IntVar(&o.XDSLimits.Streams, "xds-max-streams", gateway.DefaultLimits.Streams, "xDS streams of all clients together")
	f.IntVar(&o.XDSLimits.NamesPerRequest, "xds-max-names-per-request", gateway.DefaultLimits.NamesPerRequest, "resource names in one xDS request")
	f.IntVar(&o.XDSLimits.NamesPerSubscription, "xds-max-names-per-subscription", gateway.DefaultLimits.NamesPerSubscription, "resource names one xDS stream subscribes to per type")
	f.Int64Var(&o.XDSLimits.SubscribedBytes, "xds-max-subscribed-bytes", gateway.DefaultLimits.SubscribedBytes, "bytes of resource names subscribed by all xDS streams together")
	f.IntVar(&o.XDSLimits.NameLength, "xds-max-name-length", gateway.DefaultLimits.NameLength, "bytes of one xDS resource name or node id")
	f.IntVar(&o.XDSLimits.NodeBytes, "xds-max-node-bytes", gateway.DefaultLimits.NodeBytes, "bytes of an xDS request's node (id, metadata, locality); a larger one ends the stream before it is decoded")
	f.IntVar(&o.XDSLimits.RequestBytes, "xds-max-request-bytes", gateway.DefaultLimits.RequestBytes, "bytes of one xDS request (gRPC's receive limit)")
	f.StringVar(&o.GitAuth.Username, "git-username", "", "git username (HTTPS basic auth or SSH)")
	f.StringVar(&o.GitAuth.PasswordFile, "git-password-file", "", "file holding the git password or token")
	f.StringVar(&o.GitAuth.SSHKeyFile, "git-ssh-key-file", "", "SSH private key file")
	f.StringVar(&o.GitAuth.SSHPassphraseFile, "git-ssh-passphrase-file", "", "file holding the SSH key's passphrase")
	f.StringVar(&o.GitAuth.KnownHostsFile, "git-known-hosts-file", "", "known_hosts file for SSH")
	f.BoolVar(&o.GitAuth.InsecureIgnoreHostKey, "git-insecure-ignore-host-key", false, "do not check the SSH host key (insecure)")
	f.StringVar(&o.GitWriteback, "git-writeback", "none", "what sluice writes back to the repository: none, status, revert or status,revert")
	f.StringVar(&o.GitWritebackBranch, "git-writeback-branch", "", "push revert commits to this branch instead of the followed one (with --git-forge, also open a pull request)")
	f.StringVar(&o.GitForge, "git-forge", "", "forge for commit statuses and pull requests: github, gitlab or gitea")
	f.StringVar(&o.GitForgeURL, "git-forge-url", "", "API base URL of the forge (default: the public github.com or gitlab.com API)")
	f.StringVar(&o.GitForgeTokenFile, "git-forge-token-file", "", "file holding the forge API token")
	f.StringVar(&o.PrometheusTokenFile, "prometheus-token-file", "", "file holding a bearer token for Prometheus queries (sent to --prometheus-url only)")
	f.StringVar(&o.PrometheusURL, "prometheus-url", "", "the Prometheus --prometheus-token-file belongs to: the token is sent only to this scheme://host:port, never to other addresses or after redirects")
	f.Int64Var(&o.AnalysisMaxResponseBytes, "analysis-max-response-bytes", analysis.DefaultMaxResponseBytes, "largest Prometheus or web provider response body; a larger one is the measurement's Error")
	f.StringSliceVar(&o.AnalysisAllowHosts, "analysis-allow-hosts", nil, "addresses web metrics may reach although loopback, link-local or cloud metadata: IPs, CIDR prefixes or host names (comma-separated or repeated; default: none)")
	f.DurationVar(&o.PrometheusTimeout, "prometheus-timeout", analysis.DefaultPrometheusTimeout, "bound on a Prometheus query (and a judge measurement) whose metric sets no timeout")
	f.DurationVar(&o.WebTimeout, "web-timeout", analysis.DefaultWebTimeout, "bound on a web provider request whose metric sets no timeoutSeconds")
	f.DurationVar(&o.AckTimeout, "ack-timeout", 0, "how long a step waits for clients to ACK its routes (default 10s)")
	f.IntVar(&o.MaxConcurrentCanaries, "max-concurrent-canaries", 0, "canaries running at once; a new one beyond waits in a queue, in commit order (0: unlimited)")
	f.IntVar(&o.MaxConcurrentCanariesPerNamespace, "max-concurrent-canaries-per-namespace", 0, "canaries running at once in one namespace; a new one beyond waits in a queue (0: unlimited)")
	addStrategyLimitFlags(f, &o.StrategyLimits)
	f.BoolVar(&o.Kubernetes, "kubernetes", false, "Kubernetes mode: run each version's pods as ReplicaSets in the cluster and take endpoints from it")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file for --kubernetes (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.Float32Var(&o.KubeAPI.QPS, "kube-api-qps", kubeclient.DefaultQPS, "with --kubernetes, requests per second each apiserver connection may send (a negative value: no client-side limit, the apiserver's priority and fairness alone); see docs/kubernetes.md")
	f.IntVar(&o.KubeAPI.Burst, "kube-api-burst", kubeclient.DefaultBurst, "with --kubernetes, requests each apiserver connection may send at once above --kube-api-qps")
	f.BoolVar(&o.SchedulePods, "schedule-pods", true, "with --kubernetes, place the pods with sluice's graph scheduler (schedulerName sluice); false leaves them to kube-scheduler")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "with --kubernetes and --state-store kubernetes, act only while holding the Lease sluice-leader in --namespace (one leader among replicas)")
	f.StringVar(&o.StateStore, "state-store", daemon.StateStoreBbolt, "where the state lives: bbolt (a file in --state-dir, one replica) or kubernetes (SluiceRollout objects and a ConfigMap; needs --kubernetes; --leader-elect needs it)")
	f.StringVar(&o.RecoverFrom, "recover-from", "", "after a state loss, where a rollout sluice has no record of is recovered from: cluster (its ReplicaSets, then git; the default with --kubernetes), git (the file's history; the default otherwise) or none (the version in git becomes stable at once)")
	f.StringVar(&o.Namespace, "namespace", "", "sluice's own namespace, for the leader Lease and the state ConfigMap (default $POD_NAMESPACE, else default)")
	f.StringSliceVar(&o.WatchNamespaces, "watch-namespaces", nil, "with --kubernetes, the only namespaces sluice runs rollouts in (comma-separated or repeated; default: all); rollouts elsewhere are rejected")
	f.StringVar(&o.IstioXDSAddr, "istio-xds-addr", "", "with --kubernetes, istiod's plaintext xDS address (host:port, e.g. istiod.istio-system.svc:15010): the Istio router then verifies each weight by what istiod sends a proxyless gRPC client (default: by istiod's status, else unverified)")
	f.StringArrayVar(&o.Clusters, "cluster", nil, "with --kubernetes, another cluster rollouts may run in: NAME=KUBECONFIG[,key=value...] (labels for sluice.io/clusters; repeatable); an entry whose kubeconfig points at the home apiserver names and labels the home cluster")
	f.DurationVar(&o.ClusterProbeInterval, "cluster-probe-interval", 10*time.Second, "with --cluster, how often each cluster's /readyz is probed; a cluster that fails a probe holds its rollouts' parts until one succeeds")
	f.BoolVar(&o.ClusterSecrets, "cluster-secrets", false, "with --kubernetes, also read clusters from the Secrets labelled sluice.io/cluster=true in --namespace (needs RBAC on Secrets there)")
	f.StringVar(&o.configFile, "config", "", "YAML file with the same settings")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// addDeprecatedAlias keeps an old flag name working (command line and
// --config) for the value of its new name; it is hidden from --help and
// its use prints a notice naming the new one.
func addDeprecatedAlias(f *pflag.FlagSet, old, current string, p *string) {
	f.StringVar(p, old, "", "")
	_ = f.MarkDeprecated(old, "use --"+current)
}

// flushTraces sends the spans still queued, within a bound: the signal
// context is done by now.
func flushTraces(tp *tracing.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("flush traces", "err", err)
	}
}

func runDaemon(ctx context.Context, opts daemon.Options) error {
	if opts.LeaderElect {
		return replica.Run(ctx, opts)
	}
	d, err := daemon.New(opts)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, ho)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// applyConfigFile sets every flag named in the YAML file that was not
// given on the command line. Unknown keys are errors with their line.
func applyConfigFile(flags *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: the config must be a map of flag names to values", path, m.Line)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		fl := flags.Lookup(k.Value)
		if fl == nil || k.Value == "config" {
			return fmt.Errorf("%s:%d: %s: unknown setting", path, k.Line, k.Value)
		}
		if fl.Changed {
			continue
		}
		values := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			values = v.Content
		}
		for _, item := range values {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s:%d: %s: must be a value or a list of values", path, item.Line, k.Value)
			}
			if err := flags.Set(k.Value, item.Value); err != nil {
				return fmt.Errorf("%s:%d: %s: %w", path, item.Line, k.Value, err)
			}
		}
	}
	return nil
}
