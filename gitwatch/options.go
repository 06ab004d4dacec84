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

// DefaultTimeout bounds one git operation against the remote when
// Options.Timeout is zero. It is generous because the first fetch is a full
// clone: a 10,000-commit repository takes seconds on a LAN, much longer over
// a slow link. A remote that stalls is reported once it has passed.
const DefaultTimeout = 2 * time.Minute

// Options configure a Watcher.
type Options struct {
	// Repo is a local path, or a file://, https://, http://, ssh:// or
	// scp-like (git@host:repo) URL. Credentials come from Auth's files:
	// see checkUserInfo for the user info a URL may carry.
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
	// Timeout bounds each operation against the remote (listing its
	// branches, a fetch, the first clone); DefaultTimeout when zero.
	Timeout time.Duration
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
	// Tree bounds the depth and path length of the tree under Path
	// (TreeLimits; zero fields take the defaults).
	Tree TreeLimits
	// Mode is where the rollouts run: it decides what a strategy file must
	// hold (api.Mode; standalone by default).
	Mode api.Mode
	// WatchNamespaces rejects rollouts outside these namespaces (none:
	// all); see api.Loader.WatchNamespaces.
	WatchNamespaces []string
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
	display  string // url without user info or query, safe for logs and Status
	// hidden are the spellings of the URL, and its query, that must not
	// leave the package: redact replaces them.
	hidden []string
	path   string // fs.FS path of the strategy directory: "." or "a/b"
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
	if o.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
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
	switch ep.Protocol {
	case "file", "http", "https", "ssh":
	default:
		return nil, fmt.Errorf("repo protocol %q is not supported (file, http, https, ssh)", ep.Protocol)
	}
	if err := checkUserInfo(ep); err != nil {
		return nil, err
	}
	p := cleanPath(o.Path)
	if o.LastCommit != "" && !isHash(o.LastCommit) {
		return nil, fmt.Errorf("last commit %q is not a full hex SHA-1", o.LastCommit)
	}
	c := &config{Options: o, endpoint: ep, url: o.Repo, path: p}
	if ep.Protocol == "file" {
		c.url = ep.Path // absolute, so the cache key does not depend on the working directory
	}
	c.display, c.hidden = displayURL(o.Repo, ep)
	return c, nil
}

// checkUserInfo rejects credentials in the repository URL, which would end
// up in process listings, config files and logs. A password is refused
// everywhere. Over HTTP(S) the user name is refused too: forges accept a
// token as the user name (https://TOKEN@host/...), so a user name there
// may be a secret, and it is never needed (Auth.Username sets it). Over SSH
// the user name (git@host:repo) is an account name, not a secret, and is
// kept.
func checkUserInfo(ep *transport.Endpoint) error {
	const use = "use --git-username and --git-password-file"
	if ep.Password != "" {
		return fmt.Errorf("repo URL must not contain a password: %s", use)
	}
	if ep.User != "" && (ep.Protocol == "http" || ep.Protocol == "https") {
		return fmt.Errorf("repo URL must not contain a user name over %s (it may be a token): %s", ep.Protocol, use)
	}
	return nil
}

// displayURL is the URL without user info, query or fragment (paths of
// repositories are not secret and are kept, so logs say which repository),
// and the raw spellings redact must hide: the URL as given and as go-git
// prints it, when they differ from it, and the query.
func displayURL(raw string, ep *transport.Endpoint) (string, []string) {
	clean := *ep
	clean.User = ""
	clean.Path, _, _ = strings.Cut(clean.Path, "#")
	path, query, _ := strings.Cut(clean.Path, "?")
	clean.Path = path
	display := clean.String()
	if ep.User == "" && query == "" {
		return display, nil // nothing secret: keep file paths as they are
	}
	hidden := []string{raw, ep.String()}
	if query != "" {
		hidden = append(hidden, query)
	}
	return display, hidden
}

// redact replaces the URL's raw spellings with the display URL, and its
// query with [redacted], in text that leaves the package: go-git errors may
// quote the URL they were given.
func (c *config) redact(text string) string {
	for i, h := range c.hidden {
		switch {
		case h == "" || h == c.display:
		case i < 2:
			text = strings.ReplaceAll(text, h, c.display)
		default:
			text = strings.ReplaceAll(text, h, "[redacted]")
		}
	}
	return text
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
