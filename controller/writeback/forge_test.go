package writeback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
)

// No forge server can be run here, so these tests run the three real
// clients (go-github, GitLab's client-go, Gitea's SDK) against a local
// HTTP server that checks each request against the forge's documented REST
// API (method, path, required fields, auth header) and answers as the
// forge does: 201 with the created object, or 401, 404, 422 and 429 with
// the forge's error body and rate-limit headers.

const forgeToken = "forge-token-0123456789"

// forgeAPI is what one forge's documentation says about the two calls.
type forgeAPI struct {
	kind string
	// repo is the repository path sluice gives the client.
	repo string
	// statusPath and prPath are the escaped request paths.
	statusPath, prPath string
	// auth is the header that carries the token and its exact value.
	authHeader, authValue string
	// statusFields and prFields must be present in the JSON body.
	statusFields, prFields []string
	// created is the 201 body of a pull request.
	prCreated string
	// rateLimit sets the headers of a 429.
	rateLimit func(h http.Header)
	// prExists is the code for "already open".
	prExists int
	// base turns the test server URL into --git-forge-url.
	base func(url string) string
}

var forgeAPIs = []forgeAPI{
	{
		kind: ForgeGitHub, repo: "org/repo",
		// https://docs.github.com/en/rest/commits/statuses#create-a-commit-status
		statusPath: "/repos/org/repo/statuses/" + sha, prPath: "/repos/org/repo/pulls",
		authHeader: "Authorization", authValue: "Bearer " + forgeToken,
		statusFields: []string{"state", "context", "description", "target_url"},
		prFields:     []string{"title", "head", "base"},
		prCreated:    `{"number": 7, "html_url": "https://github.example/org/repo/pull/7"}`,
		rateLimit: func(h http.Header) {
			// Primary rate limit: none left until the reset time.
			h.Set("X-RateLimit-Limit", "5000")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10))
		},
		prExists: http.StatusUnprocessableEntity,
		base:     func(u string) string { return u + "/" },
	},
	{
		kind: ForgeGitLab, repo: "group/sub/repo",
		// https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit
		statusPath: "/api/v4/projects/group%2Fsub%2Frepo/statuses/" + sha, prPath: "/api/v4/projects/group%2Fsub%2Frepo/merge_requests",
		authHeader: "Private-Token", authValue: forgeToken,
		statusFields: []string{"state", "name", "description", "target_url"},
		prFields:     []string{"title", "source_branch", "target_branch"},
		prCreated:    `{"iid": 7, "web_url": "https://gitlab.example/group/sub/repo/-/merge_requests/7"}`,
		rateLimit:    func(h http.Header) { h.Set("Retry-After", "30"); h.Set("RateLimit-Remaining", "0") },
		prExists:     http.StatusConflict,
		base:         func(u string) string { return u },
	},
	{
		kind: ForgeGitea, repo: "org/repo",
		// https://gitea.com/api/swagger#/repository/repoCreateStatus
		statusPath: "/api/v1/repos/org/repo/statuses/" + sha, prPath: "/api/v1/repos/org/repo/pulls",
		authHeader: "Authorization", authValue: "token " + forgeToken,
		statusFields: []string{"state", "context", "description", "target_url"},
		prFields:     []string{"title", "head", "base"},
		prCreated:    `{"number": 7, "html_url": "https://gitea.example/org/repo/pulls/7"}`,
		rateLimit:    func(h http.Header) { h.Set("Retry-After", "30") },
		prExists:     http.StatusConflict,
		base:         func(u string) string { return u },
	},
}

const sha = "9f8d1114ab3c2f5e1d0c7b6a5f4e3d2c1b0a9f8e"

// fakeForge answers like the forge, after checking the request.
type fakeForge struct {
	t    *testing.T
	api  forgeAPI
	mu   sync.Mutex
	code int // answer for a valid request
	got  []map[string]any
	bad  []string // requests the forge would have refused as malformed
}

func (f *fakeForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var want []string
	switch r.URL.EscapedPath() {
	case f.api.statusPath:
		want = f.api.statusFields
	case f.api.prPath:
		want = f.api.prFields
	default:
		f.bad = append(f.bad, r.Method+" "+r.URL.EscapedPath())
		writeJSON(w, http.StatusNotFound, `{"message": "Not Found"}`)
		return
	}
	if r.Method != http.MethodPost {
		f.bad = append(f.bad, "method "+r.Method)
	}
	if got := r.Header.Get(f.api.authHeader); got != f.api.authValue {
		writeJSON(w, http.StatusUnauthorized, `{"message": "Bad credentials"}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.bad = append(f.bad, "body: "+err.Error())
	}
	for _, k := range want {
		if s, _ := body[k].(string); s == "" {
			f.bad = append(f.bad, "missing field "+k)
		}
	}
	f.got = append(f.got, body)
	switch f.code {
	case http.StatusCreated:
		if r.URL.EscapedPath() == f.api.prPath {
			writeJSON(w, http.StatusCreated, f.api.prCreated)
			return
		}
		writeJSON(w, http.StatusCreated, `{"id": 1, "state": "pending"}`)
	case http.StatusTooManyRequests:
		f.api.rateLimit(w.Header())
		writeJSON(w, http.StatusTooManyRequests, `{"message": "API rate limit exceeded"}`)
	case http.StatusUnprocessableEntity:
		writeJSON(w, http.StatusUnprocessableEntity, `{"message": "Validation Failed", "errors": [{"resource": "Status", "code": "custom", "message": "A pull request already exists for org:sluice/revert."}]}`)
	default:
		writeJSON(w, f.code, fmt.Sprintf(`{"message": "%d %s"}`, f.code, http.StatusText(f.code)))
	}
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

func startForge(t *testing.T, api forgeAPI, code int, token string) (*fakeForge, Forge) {
	t.Helper()
	fake := &fakeForge{t: t, api: api, code: code}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	forge, err := NewForge(ForgeOptions{Kind: api.kind, URL: api.base(srv.URL), TokenFile: secretFile(t, token), Repo: api.repo + ".git"})
	if err != nil {
		t.Fatal(err)
	}
	return fake, forge
}

func TestForgeStatus(t *testing.T) {
	long := strings.Repeat("analysis success-rate failed: result 0.91 < 0.99; ", 10)
	for _, api := range forgeAPIs {
		for _, tt := range []struct {
			name          string
			code          int
			token         string
			wantErr       bool
			wantPermanent bool
		}{
			{name: "created", code: http.StatusCreated},
			{name: "bad token", code: http.StatusCreated, token: "wrong-token-123456", wantErr: true, wantPermanent: true},
			{name: "unknown repository", code: http.StatusNotFound, wantErr: true, wantPermanent: true},
			{name: "invalid", code: http.StatusUnprocessableEntity, wantErr: true, wantPermanent: true},
			{name: "rate limited", code: http.StatusTooManyRequests, wantErr: true},
		} {
			t.Run(api.kind+"/"+tt.name, func(t *testing.T) {
				token := forgeToken
				if tt.token != "" {
					token = tt.token
				}
				fake, forge := startForge(t, api, tt.code, token)
				err := forge.SetStatus(context.Background(), CommitStatus{Commit: sha, State: StateFailure,
					Context: "sluice/default/checkout", Description: long, TargetURL: "http://sluice.example/api/v1/rollouts/default/checkout"})
				if (err != nil) != tt.wantErr {
					t.Fatalf("err = %v, want error %v", err, tt.wantErr)
				}
				if len(fake.bad) > 0 {
					t.Fatalf("the forge would refuse the request: %v", fake.bad)
				}
				if err != nil {
					if got := alert.Permanent(err); got != tt.wantPermanent {
						t.Errorf("Permanent(%v) = %v, want %v", err, got, tt.wantPermanent)
					}
					var apiErr *APIError
					if tt.code == http.StatusTooManyRequests && (!errors.As(err, &apiErr) || apiErr.RetryAfter < 20*time.Second) {
						t.Errorf("rate limit: %v does not say to wait ~30s", err)
					}
					if strings.Contains(err.Error(), token) {
						t.Errorf("error shows the token: %v", err)
					}
					return
				}
				body := fake.got[0]
				max := map[string]int{ForgeGitHub: githubDescriptionMax, ForgeGitLab: gitlabDescriptionMax, ForgeGitea: giteaDescriptionMax}[api.kind]
				if d, _ := body["description"].(string); len([]rune(d)) != max || !strings.HasSuffix(d, "…") {
					t.Errorf("description of %d characters, want %d, cut with …", len([]rune(d)), max)
				}
				wantState := map[string]string{ForgeGitHub: "failure", ForgeGitLab: "failed", ForgeGitea: "failure"}[api.kind]
				if body["state"] != wantState {
					t.Errorf("state %v, want %s", body["state"], wantState)
				}
			})
		}
	}
}

func TestForgePullRequest(t *testing.T) {
	for _, api := range forgeAPIs {
		for _, tt := range []struct {
			name       string
			code       int
			wantExists bool
		}{
			{name: "created", code: http.StatusCreated},
			{name: "already open", code: api.prExists, wantExists: true},
		} {
			t.Run(api.kind+"/"+tt.name, func(t *testing.T) {
				fake, forge := startForge(t, api, tt.code, forgeToken)
				url, err := forge.OpenPullRequest(context.Background(), PullRequest{Head: "sluice/revert", Base: "main",
					Title: "Revert default/checkout to v1", Body: "because"})
				if len(fake.bad) > 0 {
					t.Fatalf("the forge would refuse the request: %v", fake.bad)
				}
				if tt.wantExists {
					if !errors.Is(err, ErrPullRequestExists) {
						t.Fatalf("err = %v, want ErrPullRequestExists", err)
					}
					return
				}
				if err != nil || !strings.HasSuffix(url, "/7") {
					t.Fatalf("url %q, err %v", url, err)
				}
			})
		}
	}
}
