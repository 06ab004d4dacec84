package writeback

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go/v2"
)

// gitlabDescriptionMax is GitLab's limit on a status description.
const gitlabDescriptionMax = 255

type gitlabForge struct {
	opts    ForgeOptions
	project string
}

func newGitLab(opts ForgeOptions, project string) (*gitlabForge, error) {
	return &gitlabForge{opts: opts, project: project}, nil
}

func (f *gitlabForge) client() (*gitlab.Client, error) {
	tok, err := readToken(f.opts.TokenFile)
	if err != nil {
		return nil, err
	}
	// No retries inside the client: the outbox retries with back-off and
	// keeps the other sinks moving meanwhile.
	opts := []gitlab.ClientOptionFunc{gitlab.WithHTTPClient(f.opts.Client), gitlab.WithoutRetries()}
	if f.opts.URL != "" {
		opts = append(opts, gitlab.WithBaseURL(f.opts.URL))
	}
	c, err := gitlab.NewClient(tok, opts...)
	if err != nil {
		return nil, fmt.Errorf("forge gitlab: %w", err)
	}
	return c, nil
}

// gitlabState maps a state: a canary in progress is "running" in GitLab's
// words ("pending" there means not started).
func gitlabState(s State) gitlab.BuildStateValue {
	switch s {
	case StateSuccess:
		return gitlab.Success
	case StateFailure:
		return gitlab.Failed
	default:
		return gitlab.Running
	}
}

func (f *gitlabForge) SetStatus(ctx context.Context, s CommitStatus) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	opt := &gitlab.SetCommitStatusOptions{
		State:       gitlabState(s.State),
		Name:        gitlab.Ptr(s.Context),
		Description: gitlab.Ptr(truncate(s.Description, gitlabDescriptionMax)),
	}
	if s.TargetURL != "" {
		opt.TargetURL = gitlab.Ptr(s.TargetURL)
	}
	_, resp, err := c.Commits.SetCommitStatus(f.project, s.Commit, opt, gitlab.WithContext(ctx))
	err = gitlabError("set commit status", resp, err)
	var api *APIError
	if errors.As(err, &api) && api.Code == http.StatusBadRequest && strings.Contains(api.Message, "Cannot transition status") {
		// GitLab refuses to set a status to the state it already has
		// (a second step of a running canary): nothing to do.
		return nil
	}
	return err
}

func (f *gitlabForge) OpenPullRequest(ctx context.Context, pr PullRequest) (string, error) {
	c, err := f.client()
	if err != nil {
		return "", err
	}
	mr, resp, err := c.MergeRequests.CreateMergeRequest(f.project, &gitlab.CreateMergeRequestOptions{
		Title: gitlab.Ptr(pr.Title), Description: gitlab.Ptr(pr.Body),
		SourceBranch: gitlab.Ptr(pr.Head), TargetBranch: gitlab.Ptr(pr.Base),
	}, gitlab.WithContext(ctx))
	if err := gitlabError("create merge request", resp, err); err != nil {
		var api *APIError
		if errors.As(err, &api) && api.Code == http.StatusConflict {
			return "", fmt.Errorf("%w: %w", ErrPullRequestExists, err)
		}
		return "", err
	}
	return mr.WebURL, nil
}

func gitlabError(op string, resp *gitlab.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &APIError{Forge: ForgeGitLab, Op: op, Message: err.Error()}
	var api *gitlab.ErrorResponse
	if errors.As(err, &api) {
		e.Message = api.Message
	}
	if resp != nil && resp.Response != nil {
		e.Code = resp.StatusCode
		e.RetryAfter = retryAfter(resp.Header)
	}
	if e.Code == 0 {
		return fmt.Errorf("%s %s: %w", ForgeGitLab, op, err)
	}
	return e
}

// retryAfter reads a Retry-After header given in seconds.
func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}
