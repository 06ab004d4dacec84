package daemon

import (
	"errors"
	"log/slog"
	"time"

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

	XDSAddr   string // xDS listen address
	HTTPAddr  string // HTTP API listen address
	EnvoyPort uint32 // port of the sluice-http listener for Envoy
	XDSTLS    gateway.TLSOptions

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
		o.HTTPAddr = ":8080"
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
