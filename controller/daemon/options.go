package daemon

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
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

	XDSAddr   string // xDS listen address
	HTTPAddr  string // HTTP API listen address
	EnvoyPort uint32 // port of the sluice-http listener for Envoy
	XDSTLS    gateway.TLSOptions

	// InsecureAPI allows an HTTPAddr (default DefaultHTTPAddr) reachable
	// from the network without APITokenFile: anyone who can connect may
	// then promote and abort.
	InsecureAPI bool
	// HTTPLimits bound the HTTP server: timeouts, concurrent webhooks,
	// event streams (httpapi.DefaultLimits when zero).
	HTTPLimits httpapi.Limits

	GitAuth           gitwatch.Auth
	WebhookSecretFile string
	APITokenFile      string
	// PrometheusTokenFile is sent as a bearer token with Prometheus queries.
	PrometheusTokenFile string

	AlertWebhooks   []string
	AlertSlack      string
	AlertmanagerURL string

	// AckTimeout bounds the wait for clients to ACK a step's routes before
	// its timer and analysis start anyway (reported).
	AckTimeout time.Duration

	Logger *slog.Logger
}

// DefaultHTTPAddr keeps the API, whose write calls move traffic, off the
// network unless asked for.
const DefaultHTTPAddr = "127.0.0.1:8080"

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
		o.XDSAddr = ":18000"
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if (o.XDSTLS.CertFile == "") != (o.XDSTLS.KeyFile == "") {
		return errors.New("--xds-tls-cert and --xds-tls-key go together")
	}
	if o.XDSTLS.ClientCAFile != "" && o.XDSTLS.CertFile == "" {
		return errors.New("--xds-client-ca needs --xds-tls-cert and --xds-tls-key")
	}
	return nil
}
