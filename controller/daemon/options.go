package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/clusters"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/kubeclient"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/tracing"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gitwatch"
)

// Options are the settings of `sluice run` (DESIGN §4).
type Options struct {
	Repo     string        // URL or path of the strategy repository
	Branch   string        // "" follows the remote's HEAD branch
	Path     string        // directory of strategy files in the repository
	Interval time.Duration // poll interval
	StateDir string        // store, git cache

	// GitTimeout bounds each git operation (list, fetch, clone);
	// gitwatch.DefaultTimeout when zero.
	GitTimeout time.Duration
	// GitTree bounds the depth and path length of the tree under Path;
	// a commit over them is refused (gitwatch.TreeLimits).
	GitTree gitwatch.TreeLimits

	XDSAddr   string // xDS listen address (DefaultXDSAddr)
	HTTPAddr  string // HTTP API listen address
	EnvoyPort uint32 // port of the sluice-http listener for Envoy
	XDSTLS    gateway.TLSOptions
	// XDSLimits bound what xDS peers can make the daemon hold (zero
	// fields: gateway.DefaultLimits).
	XDSLimits gateway.Limits
	// XDSAllowedNodes are node-id patterns (path.Match); empty allows all.
	XDSAllowedNodes []string

	// InsecureXDS allows an XDSAddr reachable from the network without
	// mutual TLS (XDSTLS with a ClientCAFile): anyone who can connect
	// then reads every rollout's routes and can NACK them.
	InsecureXDS bool

	// InsecureAPI allows an HTTPAddr (default DefaultHTTPAddr) reachable
	// from the network without APITokenFile: anyone who can connect may
	// then promote and abort.
	InsecureAPI bool
	// DebugAddr serves pprof (controller/profiling) when set; it must be
	// a loopback address.
	DebugAddr string
	// HTTPLimits bound the HTTP server: timeouts, concurrent webhooks,
	// event streams (httpapi.DefaultLimits when zero).
	HTTPLimits httpapi.Limits
	// AnalysisAllowHosts lets web metrics reach loopback, link-local and
	// cloud metadata addresses, refused by default (--analysis-allow-hosts;
	// see analysis.Options.WebAllowHosts).
	AnalysisAllowHosts []string

	GitAuth           gitwatch.Auth
	WebhookSecretFile string
	APITokenFile      string
	// APIReadTokenFile holds a token the read API, the event stream and
	// the dashboard's data then need (the write token is taken too); it
	// needs APITokenFile.
	APIReadTokenFile string
	// APIAllowedHosts are host names the API answers to beyond localhost,
	// IP addresses and the host of HTTPAddr (DNS rebinding guard).
	APIAllowedHosts []string
	// APITrustedOrigins are origins whose cross-origin writes are taken
	// (a proxy that changes Host).
	APITrustedOrigins []string
	// PrometheusTokenFile is sent as a bearer token with Prometheus queries
	// to PrometheusURL's origin (scheme, host, port) and nowhere else.
	PrometheusTokenFile string
	// PrometheusURL is the Prometheus the token belongs to; required with
	// PrometheusTokenFile.
	PrometheusURL string
	// AnalysisMaxResponseBytes caps a Prometheus or web response body
	// (default 4 MiB); PrometheusTimeout (default 30s) and WebTimeout
	// (default 10s) bound queries whose metric sets no timeout.
	AnalysisMaxResponseBytes int64
	PrometheusTimeout        time.Duration
	WebTimeout               time.Duration

	AlertWebhooks   []string
	AlertSlack      string
	AlertmanagerURL string
	// The same URLs read from files, so they are not on the command line
	// (ps, shell history); each file holds one URL.
	AlertWebhookFiles   []string
	AlertSlackFile      string
	AlertmanagerURLFile string
	// AlertTimeout bounds one delivery attempt to a sink (default 10s).
	AlertTimeout time.Duration
	// AlertRate bounds the requests per second to each alert sink, with
	// bursts of AlertBurst (alert.DefaultRate, alert.DefaultBurst when
	// zero; a negative rate is unlimited).
	AlertRate  float64
	AlertBurst int

	// MaxConcurrentCanaries and MaxConcurrentCanariesPerNamespace bound
	// the canaries running at once (0: unlimited); a new canary beyond
	// them waits in a queue, in commit order (runner.Limits).
	MaxConcurrentCanaries             int
	MaxConcurrentCanariesPerNamespace int

	// GitWriteback is what sluice writes back to the repository: "none"
	// (or ""), "status", "revert" or "status,revert" (docs/git-writeback.md).
	GitWriteback string
	// GitWritebackBranch, when set, receives revert commits instead of the
	// followed branch (for protected branches); with a forge, a pull
	// request is opened from it.
	GitWritebackBranch string
	// GitForge is github, gitlab or gitea; GitForgeURL its API base URL;
	// GitForgeTokenFile holds the API token (commit statuses, pull
	// requests).
	GitForge          string
	GitForgeURL       string
	GitForgeTokenFile string

	// AckTimeout bounds the wait for clients to ACK a step's routes before
	// its timer and analysis start anyway (reported).
	AckTimeout time.Duration

	// StrategyLimits bound the strategy files read from one commit; zero
	// fields take api's defaults.
	StrategyLimits api.Limits

	// Kubernetes runs each version's pods in the cluster (Kubernetes
	// mode): ReplicaSets per version, endpoints from the cluster.
	Kubernetes bool
	// Kubeconfig is the kubeconfig file; "" follows the usual rules
	// ($KUBECONFIG, ~/.kube/config, then the in-cluster config).
	Kubeconfig string
	// KubeAPI are the client-side rate limits of every connection to an
	// apiserver (--kube-api-qps, --kube-api-burst; zero fields take
	// kubeclient's defaults). The state store's connection has none: it
	// bounds its calls in flight itself (unthrottled).
	KubeAPI kubeclient.Limits
	// SchedulePods makes sluice's graph scheduler place the pods of its
	// ReplicaSets (schedulerName sluice); false leaves them to kube-scheduler.
	SchedulePods bool
	// WatchNamespaces limits Kubernetes mode to these namespaces (none:
	// all): rollouts elsewhere are rejected, informers are namespaced.
	WatchNamespaces []string
	// IstioXDSAddr is istiod's plaintext xDS address (host:port). When
	// set, the Istio router verifies a weight by what istiod sends a
	// proxyless gRPC client (gateway/istio/observer); when empty, by
	// istiod's status, else it reports the weight unverified. Needs
	// Kubernetes.
	IstioXDSAddr string
	// Clusters are the --cluster values, NAME=KUBECONFIG[,key=value...]
	// (clusters.ParseFlag): clusters beyond the home one that rollouts may
	// run in; an entry on the home apiserver names and labels home.
	// Needs Kubernetes.
	Clusters []string
	// ClusterSecrets makes Secrets labelled sluice.io/cluster=true in
	// Namespace more clusters (controller/clusters). Off by default: it
	// needs RBAC on Secrets, and whoever may write one there adds a
	// cluster. Needs Kubernetes.
	ClusterSecrets bool
	// ClusterProbeInterval is how often each cluster's /readyz is probed
	// (0: clusters.HealthOptions' default, 10s).
	ClusterProbeInterval time.Duration

	// LeaderElect runs the daemon only while this replica holds the Lease
	// (controller/replica); needs Kubernetes and StateStoreKubernetes (a
	// bbolt store per replica would leave the next leader without records).
	LeaderElect bool
	// StateStore is where the state lives: StateStoreBbolt (a file in
	// StateDir, the default) or StateStoreKubernetes (SluiceRollout objects
	// and a ConfigMap; needs Kubernetes).
	StateStore string
	// RecoverFrom is where a rollout sluice has no record of is recovered
	// from: RecoverFromCluster (Kubernetes mode's default), RecoverFromGit
	// (standalone's) or RecoverFromNone (recover.go).
	RecoverFrom string
	// Namespace is sluice's own namespace (the Lease, the state
	// ConfigMap); "" means $POD_NAMESPACE, else "default".
	Namespace string

	Logger *slog.Logger
	// Tracing exports the commit traces (controller/tracing); nil is
	// tracing.Off(). The caller shuts it down after Run.
	Tracing *tracing.Provider

	// The fields below are set by controller/replica for the daemon of
	// the replica that leads (--leader-elect); `sluice run` leaves them
	// unset.

	// Fence guards the cluster state store's writes (the elector); nil is
	// kubestore.Unfenced.
	Fence kubestore.Fence
	// WrapGateway, when set, wraps the xDS gateway as the runner sees it:
	// the leader makes each wait for ACKs include its followers' clients.
	WrapGateway func(runner.Traffic) runner.Traffic
	// HTTPListener, when set, is the HTTP listener, already bound, that
	// the daemon serves instead of binding HTTPAddr: the follower's is
	// handed over, so the address never refuses a connection.
	HTTPListener net.Listener
	// XDSListener, when set, is the bound xDS socket the daemon serves
	// instead of binding XDSAddr: the follower's is handed over, so that
	// clients dialing during the change are not refused. The daemon
	// closes it.
	XDSListener net.Listener
}

// mode is where the rollouts run, for the strategy loader.
func (o Options) mode() api.Mode {
	if o.Kubernetes {
		return api.ModeKubernetes
	}
	return api.ModeStandalone
}

// DefaultHTTPAddr keeps the API, whose write calls move traffic, off the
// network unless asked for.
const DefaultHTTPAddr = "127.0.0.1:8080"

// DefaultXDSAddr keeps xDS, which shows every route and whose NACKs hold
// rollouts, off the network unless asked for.
const DefaultXDSAddr = "127.0.0.1:18000"

// Complete fills in the defaults and checks the settings, as New does: a
// caller that reads the Options before New (controller/replica) calls it
// first.
func (o *Options) Complete() error { return o.defaults() }

func (o *Options) defaults() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	if o.StateDir == "" {
		o.StateDir = ".sluice"
	}
	if o.Interval <= 0 {
		o.Interval = gitwatch.DefaultInterval
	}
	if o.XDSAddr == "" {
		o.XDSAddr = DefaultXDSAddr
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = DefaultHTTPAddr
	}
	if o.EnvoyPort == 0 {
		o.EnvoyPort = 10000
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 10 * time.Second
	}
	if o.Tracing == nil {
		o.Tracing = tracing.Off()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if (o.XDSTLS.CertFile == "") != (o.XDSTLS.KeyFile == "") {
		return errors.New("--xds-tls-cert-file and --xds-tls-key-file go together")
	}
	if o.PrometheusTokenFile != "" && o.PrometheusURL == "" {
		return errors.New("--prometheus-token-file needs --prometheus-url: the token is sent to that Prometheus only")
	}
	if o.AlertSlack != "" && o.AlertSlackFile != "" {
		return errors.New("--alert-slack and --alert-slack-file exclude each other")
	}
	if o.AlertmanagerURL != "" && o.AlertmanagerURLFile != "" {
		return errors.New("--alertmanager-url and --alertmanager-url-file exclude each other")
	}
	if err := o.KubeAPI.Validate(); err != nil {
		return err
	}
	if o.StateStore == "" {
		o.StateStore = StateStoreBbolt
	}
	if o.StateStore != StateStoreBbolt && o.StateStore != StateStoreKubernetes {
		return fmt.Errorf("--state-store must be %s or %s, got %q", StateStoreBbolt, StateStoreKubernetes, o.StateStore)
	}
	if o.StateStore == StateStoreKubernetes && !o.Kubernetes {
		return errors.New("--state-store kubernetes needs --kubernetes")
	}
	if o.LeaderElect && !o.Kubernetes {
		return errors.New("--leader-elect needs --kubernetes")
	}
	if o.LeaderElect && o.StateStore != StateStoreKubernetes {
		// The only other store is bbolt: a file per replica.
		return errors.New("--leader-elect needs --state-store kubernetes: with bbolt each replica has its own store, " +
			"so after a failover the new leader finds no record of any rollout: it has to rebuild every one from the cluster " +
			"and git, holding in-flight canaries and losing pauses, approvals and aborts; set --state-store kubernetes")
	}
	if err := o.recoverFromDefault(); err != nil {
		return err
	}
	if o.XDSTLS.ClientCAFile != "" && o.XDSTLS.CertFile == "" {
		return errors.New("--xds-client-ca-file needs --xds-tls-cert-file and --xds-tls-key-file")
	}
	if err := o.checkXDSExposure(addrOnLoopback(o.XDSAddr), o.XDSAddr); err != nil {
		return err
	}
	if o.MaxConcurrentCanaries < 0 || o.MaxConcurrentCanariesPerNamespace < 0 {
		return errors.New("--max-concurrent-canaries and --max-concurrent-canaries-per-namespace must be 0 (unlimited) or more")
	}
	if len(o.WatchNamespaces) > 0 && !o.Kubernetes {
		return errors.New("--watch-namespaces needs --kubernetes")
	}
	if o.IstioXDSAddr != "" {
		if !o.Kubernetes {
			return errors.New("--istio-xds-addr needs --kubernetes")
		}
		if _, _, err := net.SplitHostPort(o.IstioXDSAddr); err != nil {
			return fmt.Errorf("--istio-xds-addr %q: want host:port of istiod's plaintext xDS (e.g. istiod.istio-system.svc:15010): %w", o.IstioXDSAddr, err)
		}
	}
	return o.checkClusters()
}

// checkClusters checks the --cluster values without reading their
// kubeconfigs: clusters.Load does, when the daemon connects.
func (o *Options) checkClusters() error {
	if len(o.Clusters) > 0 && !o.Kubernetes {
		return errors.New("--cluster needs --kubernetes")
	}
	if o.ClusterSecrets && !o.Kubernetes {
		return errors.New("--cluster-secrets needs --kubernetes")
	}
	for _, c := range o.Clusters {
		if _, err := clusters.ParseFlag(c); err != nil {
			return err
		}
	}
	return nil
}

// checkXDSExposure refuses xDS that hosts other than this one can reach
// without mutual TLS, unless InsecureXDS says so: whoever connects reads
// every rollout's routes, and a NACK holds a rollout's step. TLS without
// client certificates is not enough, since any client could still connect.
func (o *Options) checkXDSExposure(loopback bool, where string) error {
	if loopback || o.InsecureXDS || o.xdsMutualTLS() {
		return nil
	}
	missing := "has no TLS"
	if o.XDSTLS.CertFile != "" {
		missing = "has TLS but no client certificates (--xds-client-ca-file), so any client can connect"
	}
	return fmt.Errorf("xds on %s (--xds-addr %q) is reachable from the network and %s: anyone who can connect reads every rollout's routes "+
		"and can NACK them to hold a canary; give --xds-tls-cert-file, --xds-tls-key-file and --xds-client-ca-file (mutual TLS), "+
		"or bind --xds-addr to 127.0.0.1, or accept the risk with --insecure-xds", where, o.XDSAddr, missing)
}

// xdsMutualTLS says whether xDS clients must present a certificate.
func (o *Options) xdsMutualTLS() bool {
	return o.XDSTLS.CertFile != "" && o.XDSTLS.KeyFile != "" && o.XDSTLS.ClientCAFile != ""
}

// addrOnLoopback says whether a listen address names loopback only:
// localhost or a loopback IP. An empty host (":18000"), an unspecified or
// other IP, and any other host name count as the network; the daemon
// checks the bound address again (onLoopback).
func addrOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// recoverFromDefault fills and checks RecoverFrom.
func (o *Options) recoverFromDefault() error {
	switch o.RecoverFrom {
	case "":
		o.RecoverFrom = RecoverFromGit
		if o.Kubernetes {
			o.RecoverFrom = RecoverFromCluster
		}
	case RecoverFromCluster:
		if !o.Kubernetes {
			return errors.New("--recover-from cluster needs --kubernetes: standalone mode has no cluster to read (use git)")
		}
	case RecoverFromGit, RecoverFromNone:
	default:
		return fmt.Errorf("--recover-from must be %s, %s or %s, got %q", RecoverFromCluster, RecoverFromGit, RecoverFromNone, o.RecoverFrom)
	}
	if o.RecoverFrom == RecoverFromNone {
		o.Logger.Warn("--recover-from none: after a state loss the version at the head of git becomes stable at 100 % at once, without its steps or analysis")
	}
	return nil
}
