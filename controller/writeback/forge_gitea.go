package writeback

import (
	"context"
	"fmt"
	"net/http"

	giteasdk "code.gitea.io/sdk/gitea"
)

// giteaDescriptionMax keeps Gitea's descriptions as short as GitLab's.
const giteaDescriptionMax = 255

type gitea struct {
	opts        ForgeOptions
	owner, name string
}

// client is made per call: the SDK takes the context as client state.
func (f *gitea) client(ctx context.Context) (*giteasdk.Client, error) {
	tok, err := readToken(f.opts.TokenFile)
	if err != nil {
		return nil, err
	}
	c, err := giteasdk.NewClient(f.opts.URL, giteasdk.SetToken(tok), giteasdk.SetHTTPClient(f.opts.Client),
		giteasdk.SetContext(ctx),
		// Skip the version probe: one request fewer per status.
		giteasdk.SetGiteaVersion(""))
	if err != nil {
		return nil, fmt.Errorf("forge gitea: %w", err)
	}
	return c, nil
}

func (f *gitea) SetStatus(ctx context.Context, s CommitStatus) error {
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	_, resp, err := c.CreateStatus(f.owner, f.name, s.Commit, giteasdk.CreateStatusOption{
		State:       giteasdk.StatusState(s.State),
		TargetURL:   s.TargetURL,
		Description: truncate(s.Description, giteaDescriptionMax),
		Context:     s.Context,
	})
	return giteaError("create status", resp, err)
}

func (f *gitea) OpenPullRequest(ctx context.Context, pr PullRequest) (string, error) {
	c, err := f.client(ctx)
	if err != nil {
		return "", err
	}
	created, resp, err := c.CreatePullRequest(f.owner, f.name, giteasdk.CreatePullRequestOption{
		Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body,
	})
	if err := giteaError("create pull request", resp, err); err != nil {
		if resp != nil && resp.StatusCode == http.StatusConflict {
			return "", fmt.Errorf("%w: %w", ErrPullRequestExists, err)
		}
		return "", err
	}
	return created.HTMLURL, nil
}

func giteaError(op string, resp *giteasdk.Response, err error) error {
	if err == nil {
		return nil
	}
	if resp == nil || resp.Response == nil {
		return fmt.Errorf("%s %s: %w", ForgeGitea, op, err)
	}
	return &APIError{Forge: ForgeGitea, Op: op, Code: resp.StatusCode, RetryAfter: retryAfter(resp.Header), Message: err.Error()}
}
