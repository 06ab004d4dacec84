package gitwatch

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
)

// DefaultInterval is the poll interval when Options.Interval is zero.
const DefaultInterval = 30 * time.Second

// Options configure a Watcher.
type Options struct {
	// Repo is a local path, or a file://, https://, http://, ssh:// or
	// scp-like (git@host:repo) URL. A password in the URL is rejected:
	// credentials come from Auth's files.
	Repo string
	// Branch to follow; "" follows the remote's HEAD branch.
	Branch string
	// Path is the directory of strategy files inside the repository;
	// "" or "." is the root.
	Path string
	// CacheDir holds the bare clone (one subdirectory per repository URL).
	CacheDir string
	// Interval between polls (±5 % jitter); DefaultInterval when zero.
	Interval time.Duration
	// Auth names the credential files.
	Auth Auth
	// WebhookSecret verifies /hook requests; surrounding whitespace is
	// trimmed. Empty rejects every hook.
	WebhookSecret []byte
	// LastCommit is the last commit the controller processed (persisted by
	// it); "" means first run: one Revision for the current head.
	LastCommit string
	// ReplayLast hands out LastCommit itself again before the commits after
	// it (with Replay set), so a restarted controller learns the strategy
	// in force, analysis templates included, even when nothing was pushed
	// while it was down. Skipped when LastCommit is no longer in history.
	ReplayLast bool
	// Limits bound the strategy files read from one commit (api.Limits;
	// zero fields take the defaults).
	Limits api.Limits
	// Logger receives the watcher's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Registry receives sluice_git_fetch_seconds; a private registry when nil.
	Registry *prometheus.Registry
}

// Auth names the files credentials are read from. Their contents are read on
// every fetch and are never logged or put in errors or Status.
type Auth struct {
	// Username for HTTPS basic auth ("git" when only PasswordFile is set,
	// which suits token auth) or for SSH (default: the URL's user, else "git").
	Username string
	// PasswordFile holds the HTTPS password or token (whitespace trimmed).
	PasswordFile string
	// SSHKeyFile holds a PEM or OpenSSH private key.
	SSHKeyFile string
	// SSHPassphraseFile holds the key's passphrase (whitespace trimmed).
	SSHPassphraseFile string
	// KnownHostsFile is checked against the server's host key; when empty,
	// $SSH_KNOWN_HOSTS or ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts.
	KnownHostsFile string
	// InsecureIgnoreHostKey skips host key checking. It must be asked for
	// explicitly; it is never a fallback.
	InsecureIgnoreHostKey bool
}

// config is Options after defaults and validation.
type config struct {
	Options
	endpoint *transport.Endpoint
	url      string // what go-git is given: absolute for local paths
	display  string // url without user info, safe for logs and Status
	path     string // fs.FS path of the strategy directory: "." or "a/b"
}

func (o Options) config() (*config, error) {
	if o.Repo == "" {
		return nil, errors.New("repo is required")
	}
	if o.CacheDir == "" {
		return nil, errors.New("cache dir is required")
	}
	if o.Interval < 0 {
		return nil, fmt.Errorf("interval %s is negative", o.Interval)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	o.WebhookSecret = bytes.TrimSpace(o.WebhookSecret)
	o.Branch = strings.TrimPrefix(o.Branch, "refs/heads/")
	ep, err := transport.NewEndpoint(o.Repo)
	if err != nil {
		return nil, errors.New("repo is not a valid git URL or path")
	}
	if ep.Password != "" {
		return nil, errors.New("repo URL must not contain a password: use the password file")
	}
	switch ep.Protocol {
	case "file", "http", "https", "ssh":
	default:
		return nil, fmt.Errorf("repo protocol %q is not supported (file, http, https, ssh)", ep.Protocol)
	}
	p := cleanPath(o.Path)
	if o.LastCommit != "" && !isHash(o.LastCommit) {
		return nil, fmt.Errorf("last commit %q is not a full hex SHA-1", o.LastCommit)
	}
	c := &config{Options: o, endpoint: ep, url: o.Repo, path: p}
	if ep.Protocol == "file" {
		c.url = ep.Path // absolute, so the cache key does not depend on the working directory
	}
	redacted := *ep
	redacted.User = ""
	c.display = redacted.String()
	return c, nil
}

// cleanPath turns --path into an fs.FS name: "deploy/", "./deploy" and
// "/deploy" all mean "deploy"; "" and "." mean the root. ".." cannot climb
// out of the repository.
func cleanPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+strings.TrimSpace(p)), "/")
	if p == "" {
		return "."
	}
	return p
}

func isHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
