package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Sink delivers alerts to one destination. Send must be safe to call again
// with the same alert: delivery is at least once.
type Sink interface {
	// Name identifies the sink in the outbox; it must stay the same across
	// restarts so that delivered ids are remembered (the kind and URL).
	Name() string
	Send(ctx context.Context, a Alert) error
}

// Kind selects how a sink formats alerts.
type Kind string

// Sink kinds.
const (
	KindWebhook      Kind = "webhook"
	KindSlack        Kind = "slack"
	KindAlertmanager Kind = "alertmanager"
)

// SinkOptions configure an HTTP sink.
type SinkOptions struct {
	Kind Kind
	// URL is the webhook or Slack URL, or Alertmanager's base URL (the
	// sink posts to URL + "/api/v2/alerts").
	URL string
	// Name overrides the default name, kind + ":" + URL.
	Name string
	// Client defaults to a client with Timeout.
	Client *http.Client
	// Timeout bounds one delivery attempt; default 10s.
	Timeout time.Duration
}

// HTTPSink posts alerts as JSON: the Alert itself, a Slack message, or an
// Alertmanager alert list, depending on its Kind.
type HTTPSink struct {
	kind   Kind
	name   string
	target string
	client *http.Client
}

var _ Sink = (*HTTPSink)(nil)

// NewSink validates opts and returns the sink.
func NewSink(opts SinkOptions) (*HTTPSink, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("%s sink url: %w", opts.Kind, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s sink url %q: want an absolute http(s) URL", opts.Kind, opts.URL)
	}
	target := opts.URL
	switch opts.Kind {
	case KindWebhook, KindSlack:
	case KindAlertmanager:
		target = u.JoinPath("api", "v2", "alerts").String()
	default:
		return nil, fmt.Errorf("unknown sink kind %q", opts.Kind)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	if opts.Name == "" {
		opts.Name = string(opts.Kind) + ":" + opts.URL
	}
	return &HTTPSink{kind: opts.Kind, name: opts.Name, target: target, client: opts.Client}, nil
}

// Name implements Sink.
func (s *HTTPSink) Name() string { return s.name }

// Send implements Sink: one POST, success on any 2xx answer.
func (s *HTTPSink) Send(ctx context.Context, a Alert) error {
	var body any
	switch s.kind {
	case KindSlack:
		body = SlackMessage(a)
	case KindAlertmanager:
		body = []AlertmanagerAlert{ToAlertmanager(a)}
	default:
		body = a
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode alert %s: %w", a.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("post alert %s: %w", a.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Receivers that deduplicate themselves can use this header.
	req.Header.Set("Idempotency-Key", a.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("post alert %s: %w", a.ID, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(msg))}
	}
	return nil
}

// StatusError is a non-2xx answer from a sink.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("sink answered %d", e.Code)
	}
	return fmt.Sprintf("sink answered %d: %s", e.Code, e.Body)
}

// Permanent reports whether retrying err cannot help: a 4xx answer other
// than 408 (timeout) and 429 (rate limited) means the sink rejects this
// alert as such.
func Permanent(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	return se.Code >= 400 && se.Code < 500 && se.Code != http.StatusRequestTimeout && se.Code != http.StatusTooManyRequests
}
