package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/controller/alert"
)

// Forge is the API of the forge hosting the repository: commit statuses
// and pull (merge) requests. The clients are the forges' own Go libraries
// (those Flux's notification-controller uses for the same job), never
// hand-written HTTP.
type Forge interface {
	// SetStatus posts one commit status.
	SetStatus(ctx context.Context, s CommitStatus) error
	// OpenPullRequest asks to merge pr.Head into pr.Base and returns the
	// request's web URL. ErrPullRequestExists when one is already open.
	OpenPullRequest(ctx context.Context, pr PullRequest) (string, error)
}

// State of a commit status, in GitHub's words; each client maps them.
type State string

// States.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
)

// CommitStatus is one status on one commit.
type CommitStatus struct {
	Commit string
	State  State
	// Context tells statuses apart on a commit: sluice/<namespace>/<name>.
	Context     string
	Description string
	TargetURL   string
}

// PullRequest asks to merge Head into Base.
type PullRequest struct {
	Head, Base  string
	Title, Body string
}

// ErrPullRequestExists: a request from the same branch is already open.
var ErrPullRequestExists = errors.New("a pull request from this branch is already open")

// Forge kinds (--git-forge).
const (
	ForgeGitHub = "github"
	ForgeGitLab = "gitlab"
	ForgeGitea  = "gitea"
)

// ForgeOptions configure a Forge client.
type ForgeOptions struct {
	// Kind is github, gitlab or gitea.
	Kind string
	// URL is the API base URL; the public github.com or gitlab.com API by
	// default, required for gitea.
	URL string
	// TokenFile holds the API token; read on every call, so rotation needs
	// no restart.
	TokenFile string
	// Repo is the repository's path on the forge: "owner/name" (GitHub,
	// Gitea use its last two segments), "group/sub/name" for GitLab.
	Repo string
	// Client is the HTTP client (default: one with a 30s timeout).
	Client *http.Client
}

// NewForge returns the client for opts.Kind.
func NewForge(opts ForgeOptions) (Forge, error) {
	if opts.TokenFile == "" {
		return nil, errors.New("forge: a token file is required")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 30 * time.Second}
	}
	repo := strings.TrimSuffix(strings.Trim(opts.Repo, "/"), ".git")
	if repo == "" {
		return nil, errors.New("forge: cannot tell the repository's path from its URL")
	}
	switch opts.Kind {
	case ForgeGitHub:
		owner, name, err := ownerName(repo)
		if err != nil {
			return nil, err
		}
		return newGitHub(opts, owner, name)
	case ForgeGitLab:
		return newGitLab(opts, repo)
	case ForgeGitea:
		if opts.URL == "" {
			return nil, errors.New("forge gitea: --git-forge-url is required")
		}
		owner, name, err := ownerName(repo)
		if err != nil {
			return nil, err
		}
		return &gitea{opts: opts, owner: owner, name: name}, nil
	default:
		return nil, fmt.Errorf("forge %q: want github, gitlab or gitea", opts.Kind)
	}
}

func ownerName(repo string) (string, string, error) {
	parts := strings.Split(repo, "/")
	if len(parts) < 2 {
		return "", "", fmt.Errorf("forge: repository path %q has no owner/name", repo)
	}
	return parts[len(parts)-2], parts[len(parts)-1], nil
}

// readToken reads the token file; errors name the file, never its content.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("forge token: %w", err)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" {
		return "", fmt.Errorf("forge token file %s is empty", file)
	}
	return tok, nil
}

// APIError is a forge's refusal: its HTTP code, how long it asked us to
// wait (rate limits), and its message.
type APIError struct {
	Forge, Op  string
	Code       int
	RetryAfter time.Duration
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: answered %d: %s", e.Forge, e.Op, e.Code, e.Message)
}

// Unwrap shows the answer as an alert.StatusError, so the outbox drops
// what retrying cannot fix (401, 403, 404, 422) and retries the rest (429,
// 5xx) with back-off.
func (e *APIError) Unwrap() error { return &alert.StatusError{Code: e.Code, Body: e.Message} }

// truncate cuts s to max characters, as the forge requires of a
// description, marking the cut.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
