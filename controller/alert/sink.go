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
	// restarts so that delivered ids are remembered (the kind and URL). It
	// may hold secrets: logs and metrics use String when the sink has one.
	Name() string
	Send(ctx context.Context, a Alert) error
}

// BatchSink is an optional Sink extension: a sink whose receiver takes
// several alerts in one request (Alertmanager's /api/v2/alerts takes a
// list). In an alert storm one request then carries many alerts, so the
// per-sink rate limit costs far less time.
type BatchSink interface {
	Sink
	// BatchSize is the most alerts SendBatch takes at once; 1 or less
	// means the sink does not batch.
	BatchSize() int
	// SendBatch delivers all of as or none (the answer is for the request).
	SendBatch(ctx context.Context, as []Alert) error
}

// AlertmanagerBatch is how many alerts one POST to Alertmanager carries.
const AlertmanagerBatch = 100

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
	// Client defaults to http.Client's zero value.
	Client *http.Client
	// Timeout bounds one delivery attempt (connect, send, answer); default
	// DefaultTimeout. A timed-out attempt is retried with back-off.
	Timeout time.Duration
}

// DefaultTimeout bounds one delivery attempt unless SinkOptions.Timeout
// says otherwise.
const DefaultTimeout = 10 * time.Second

// HTTPSink posts alerts as JSON: the Alert itself, a Slack message, or an
// Alertmanager alert list, depending on its Kind.
type HTTPSink struct {
	kind    Kind
	name    string
	display string // kind and redacted URL, for logs and metrics
	target  string
	client  *http.Client
	timeout time.Duration
}

var _ BatchSink = (*HTTPSink)(nil)

// NewSink validates opts and returns the sink.
func NewSink(opts SinkOptions) (*HTTPSink, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("%s sink url: %w", opts.Kind, redactError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s sink url %s: want an absolute http(s) URL", opts.Kind, RedactURL(opts.URL))
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
		opts.Timeout = DefaultTimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Name == "" {
		opts.Name = string(opts.Kind) + ":" + opts.URL
	}
	return &HTTPSink{
		kind: opts.Kind, name: opts.Name, display: string(opts.Kind) + ":" + RedactURL(opts.URL),
		target: target, client: opts.Client, timeout: opts.Timeout,
	}, nil
}

// Name implements Sink. It holds the full URL: never log it.
func (s *HTTPSink) Name() string { return s.name }

// String is the kind and the redacted URL, e.g. "slack:https://hooks.slack.com/…".
func (s *HTTPSink) String() string { return s.display }

// BatchSize implements BatchSink: Alertmanager takes AlertmanagerBatch
// alerts per request; a webhook or Slack one alert.
func (s *HTTPSink) BatchSize() int {
	if s.kind == KindAlertmanager {
		return AlertmanagerBatch
	}
	return 1
}

// Send implements Sink: one POST, success on any 2xx answer. The attempt
// ends after the sink's timeout; errors never show the URL's secrets. A
// non-2xx answer is a *StatusError carrying the answer's Retry-After.
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
	return s.post(ctx, a.ID, body)
}

// SendBatch implements BatchSink: Alertmanager gets the alerts as one
// list; other kinds send them one by one.
func (s *HTTPSink) SendBatch(ctx context.Context, as []Alert) error {
	if s.kind != KindAlertmanager {
		for _, a := range as {
			if err := s.Send(ctx, a); err != nil {
				return err
			}
		}
		return nil
	}
	body := make([]AlertmanagerAlert, 0, len(as))
	for _, a := range as {
		body = append(body, ToAlertmanager(a))
	}
	if len(as) == 0 {
		return nil
	}
	id := as[0].ID
	if len(as) > 1 {
		id = fmt.Sprintf("%s (+%d)", id, len(as)-1)
	}
	return s.post(ctx, id, body)
}

// post sends one JSON body; id names the alert(s) in errors and in the
// Idempotency-Key header.
func (s *HTTPSink) post(ctx context.Context, id string, body any) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode alert %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("post alert %s: %w", id, redactError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	// Receivers that deduplicate themselves can use this header.
	req.Header.Set("Idempotency-Key", id)
	resp, err := s.client.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("post alert %s: no answer within %s (--alert-timeout): %w", id, s.timeout, redactError(err))
	}
	if err != nil {
		return fmt.Errorf("post alert %s: %w", id, redactError(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(msg)), RetryAfter: retryAfter(resp.Header, time.Now())}
	}
	return nil
}

// StatusError is a non-2xx answer from a sink.
type StatusError struct {
	Code int
	Body string
	// RetryAfter is the answer's Retry-After (429, 503), 0 without one.
	RetryAfter time.Duration
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
