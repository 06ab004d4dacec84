package writeback

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v79/github"
)

// githubDescriptionMax is GitHub's limit on a status description.
const githubDescriptionMax = 140

type githubForge struct {
	opts        ForgeOptions
	base        *url.URL
	owner, name string
}

func newGitHub(opts ForgeOptions, owner, name string) (*githubForge, error) {
	f := &githubForge{opts: opts, owner: owner, name: name}
	if opts.URL != "" {
		u, err := url.Parse(strings.TrimSuffix(opts.URL, "/") + "/")
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("forge github: --git-forge-url %q is not an absolute URL", opts.URL)
		}
		f.base = u
	}
	return f, nil
}

func (f *githubForge) client() (*github.Client, error) {
	tok, err := readToken(f.opts.TokenFile)
	if err != nil {
		return nil, err
	}
	c := github.NewClient(f.opts.Client).WithAuthToken(tok)
	if f.base != nil {
		// The API base as given (GitHub Enterprise: https://host/api/v3/);
		// WithEnterpriseURLs would rewrite it.
		c.BaseURL = f.base
	}
	return c, nil
}

func (f *githubForge) SetStatus(ctx context.Context, s CommitStatus) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	st := github.RepoStatus{
		State:       github.Ptr(string(s.State)),
		Context:     github.Ptr(s.Context),
		Description: github.Ptr(truncate(s.Description, githubDescriptionMax)),
	}
	if s.TargetURL != "" {
		st.TargetURL = github.Ptr(s.TargetURL)
	}
	_, resp, err := c.Repositories.CreateStatus(ctx, f.owner, f.name, s.Commit, st)
	return githubError("create status", resp, err)
}

func (f *githubForge) OpenPullRequest(ctx context.Context, pr PullRequest) (string, error) {
	c, err := f.client()
	if err != nil {
		return "", err
	}
	created, resp, err := c.PullRequests.Create(ctx, f.owner, f.name, &github.NewPullRequest{
		Title: github.Ptr(pr.Title), Head: github.Ptr(pr.Head), Base: github.Ptr(pr.Base), Body: github.Ptr(pr.Body),
	})
	if err := githubError("create pull request", resp, err); err != nil {
		var api *APIError
		if errors.As(err, &api) && api.Code == http.StatusUnprocessableEntity && strings.Contains(api.Message, "already exists") {
			// GitHub tells an open duplicate only by its message.
			return "", fmt.Errorf("%w: %w", ErrPullRequestExists, err)
		}
		return "", err
	}
	return created.GetHTMLURL(), nil
}

// githubWait reads the wait of a rate limit that go-github does not parse
// itself (it knows the primary limit only on a 403, while GitHub may
// answer 429): Retry-After, else the reset time once none are left.
func githubWait(h http.Header) time.Duration {
	if d := retryAfter(h); d > 0 {
		return d
	}
	if h.Get("X-RateLimit-Remaining") != "0" {
		return 0
	}
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return 0
	}
	return time.Until(time.Unix(reset, 0))
}

// githubError turns go-github's error into an APIError with the wait the
// rate limit asks for.
func githubError(op string, resp *github.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &APIError{Forge: ForgeGitHub, Op: op, Message: err.Error()}
	var rate *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	var api *github.ErrorResponse
	switch {
	case errors.As(err, &rate):
		e.Code, e.Message = http.StatusTooManyRequests, rate.Message
		e.RetryAfter = time.Until(rate.Rate.Reset.Time)
	case errors.As(err, &abuse):
		e.Code, e.Message = http.StatusTooManyRequests, abuse.Message
		e.RetryAfter = abuse.GetRetryAfter()
	case errors.As(err, &api):
		e.Message = api.Message
		for _, d := range api.Errors {
			e.Message += "; " + d.Message
		}
	}
	if e.Code == 0 && resp != nil {
		e.Code = resp.StatusCode
	}
	if e.RetryAfter <= 0 && resp != nil {
		e.RetryAfter = githubWait(resp.Header)
	}
	if e.Code == 0 {
		return fmt.Errorf("%s %s: %w", ForgeGitHub, op, err) // no answer: retried
	}
	return e
}
