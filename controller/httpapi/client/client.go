// Package client talks to a running sluice daemon's HTTP API (DESIGN §5):
// status, operator commands and the event stream. The sluice client
// commands are thin wrappers around it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
)

// DefaultServer is used when neither --server nor SLUICE_SERVER is set.
const DefaultServer = "http://127.0.0.1:8080"

// EnvServer names the environment variable holding the server URL.
const EnvServer = "SLUICE_SERVER"

// Options configure a Client.
type Options struct {
	// Server is the daemon's base URL; default DefaultServer.
	Server string
	// Token is sent as a bearer token on every call (writes need the
	// write token; reads need a token when the server has a read token).
	Token string
	// HTTPClient defaults to one without a timeout (the event stream is
	// long-lived); Timeout bounds every other call.
	HTTPClient *http.Client
	// Timeout bounds one status or command call; default 30s.
	Timeout time.Duration
}

// Client is a sluice API client.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	timeout time.Duration
}

// New validates opts and returns a client.
func New(opts Options) (*Client, error) {
	if opts.Server == "" {
		opts.Server = DefaultServer
	}
	if !strings.Contains(opts.Server, "://") {
		opts.Server = "http://" + opts.Server
	}
	u, err := url.Parse(opts.Server)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("server url %q: want http(s)://host:port", opts.Server)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	return &Client{base: u, token: opts.Token, http: opts.HTTPClient, timeout: opts.Timeout}, nil
}

// Error is a non-2xx answer of the API. errors.Is matches it against
// httpapi.ErrNotFound (404), httpapi.ErrNotAllowed (409) and
// httpapi.ErrBadCommand (400), and a follower's refusal of a write
// against httpapi.ErrNotLeader (503 naming the leader).
type Error struct {
	Code    int
	Message string
	// NotLeader: the replica that answered follows (--leader-elect) and
	// takes no writes; Leader is the one that leads ("" if unknown).
	NotLeader bool
	Leader    string
}

func (e *Error) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }

// Is maps status codes onto the API's sentinel errors.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case http.StatusNotFound:
		return target == httpapi.ErrNotFound
	case http.StatusConflict:
		return target == httpapi.ErrNotAllowed
	case http.StatusBadRequest:
		return target == httpapi.ErrBadCommand
	case http.StatusServiceUnavailable:
		return e.NotLeader && target == httpapi.ErrNotLeader
	}
	return false
}

// ErrUnauthorized is matched by a 401 answer.
var ErrUnauthorized = errors.New("unauthorized")

// List returns every rollout, sorted by namespace and name.
func (c *Client) List(ctx context.Context) ([]httpapi.RolloutStatus, error) {
	var l httpapi.List
	if err := c.do(ctx, http.MethodGet, "api/v1/rollouts", nil, &l); err != nil {
		return nil, fmt.Errorf("list rollouts: %w", err)
	}
	return l.Items, nil
}

// Get returns one rollout's status.
func (c *Client) Get(ctx context.Context, key api.Key) (httpapi.RolloutStatus, error) {
	var st httpapi.RolloutStatus
	if err := c.do(ctx, http.MethodGet, rolloutPath(key), nil, &st); err != nil {
		return st, fmt.Errorf("get rollout %s: %w", key, err)
	}
	return st, nil
}

// Recent returns the last events of one rollout, oldest first.
func (c *Client) Recent(ctx context.Context, key api.Key) ([]httpapi.Event, error) {
	var ev httpapi.Events
	if err := c.do(ctx, http.MethodGet, rolloutPath(key)+"/events", nil, &ev); err != nil {
		return nil, fmt.Errorf("events of %s: %w", key, err)
	}
	return ev.Items, nil
}

// Command sends an operator command (one of httpapi.Verbs) and returns the new
// status. full is promote --full.
func (c *Client) Command(ctx context.Context, key api.Key, verb string, full bool) (httpapi.RolloutStatus, error) {
	var st httpapi.RolloutStatus
	q := url.Values{}
	if full {
		q.Set("full", "true")
	}
	if err := c.do(ctx, http.MethodPost, rolloutPath(key)+"/"+url.PathEscape(verb), q, &st); err != nil {
		return st, fmt.Errorf("%s %s: %w", verb, key, err)
	}
	return st, nil
}

func rolloutPath(k api.Key) string {
	return "api/v1/rollouts/" + url.PathEscape(k.Namespace) + "/" + url.PathEscape(k.Name)
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// send makes the request and turns a non-2xx answer into *Error.
func (c *Client) send(ctx context.Context, method, path string, q url.Values) (*http.Response, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	// The token goes with reads too: a server with --api-read-token-file
	// needs it there (the write token is accepted for reads).
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// Marks a program, not an HTML form: the server refuses writes
	// without it (httpapi.ClientHeader).
	req.Header.Set(httpapi.ClientHeader, "sluice-cli")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var eb struct {
		Error string `json:"error"`
		// Leader is present in a follower's refusal (httpapi.NotLeaderError).
		Leader *string `json:"leader"`
	}
	apiErr := &Error{Code: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		apiErr.Message = eb.Error
		if eb.Leader != nil && resp.StatusCode == http.StatusServiceUnavailable {
			apiErr.NotLeader, apiErr.Leader = true, *eb.Leader
		}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("%w: %w (set --token-file)", ErrUnauthorized, apiErr)
	}
	return nil, apiErr
}

// Stream reads GET /api/v1/events (limited to one rollout when only is not
// nil) and calls fn for every event until ctx is done, the stream ends, or
// fn returns an error. connected, if not nil, is called once the server
// has answered, before any event; an error from it ends the stream too.
// Errors from connected and fn are returned as they are, never wrapped.
// A stream closed by the server returns io.EOF.
func (c *Client) Stream(ctx context.Context, only *api.Key, connected func() error, fn func(httpapi.Event) error) error {
	q := url.Values{}
	if only != nil {
		q.Set("rollout", only.String())
	}
	resp, err := c.send(ctx, http.MethodGet, "api/v1/events", q)
	if err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	defer resp.Body.Close()
	if connected != nil {
		if err := connected(); err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0: // end of one event
			if data.Len() == 0 {
				continue
			}
			var e httpapi.Event
			if err := json.Unmarshal(data.Bytes(), &e); err != nil {
				return fmt.Errorf("event stream: decode event: %w", err)
			}
			data.Reset()
			if err := fn(e); err != nil {
				return err
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
		// Comments (": ping"), id: and event: lines carry nothing we need.
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	return io.EOF
}
