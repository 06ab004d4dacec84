package analysis

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
)

// origin is the scheme, host and port a credential belongs to. Two URLs
// share an origin only when all three are equal; a missing port is the
// scheme's default, so http://prom and http://prom:80 are one origin.
type origin struct {
	scheme, host, port string
}

func originOf(u *url.URL) origin {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: port}
}

func (o origin) String() string {
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// parseOrigin reads the origin of an absolute http(s) URL.
func parseOrigin(raw string) (origin, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return origin{}, redactURLError(err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return origin{}, fmt.Errorf("%s: want an absolute http(s) URL", redactURL(raw))
	}
	return originOf(u), nil
}

// scopedHeaders adds fixed headers and a bearer token read from a file, on
// every request to its origin and to no other. The check runs on every
// hop, so a redirect to another host never carries them (http.Client
// calls RoundTrip once per hop, with the hop's URL). The token file is
// read on each request, so a rotated token is picked up without a
// restart.
type scopedHeaders struct {
	base      http.RoundTripper
	origin    origin
	headers   map[string]string
	tokenFile string
}

func (t *scopedHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if (len(t.headers) == 0 && t.tokenFile == "") || originOf(req.URL) != t.origin {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if t.tokenFile != "" {
		b, err := os.ReadFile(t.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("read bearer token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// ResponseTooLargeError is a provider response whose body exceeds the
// engine's MaxResponseBytes.
type ResponseTooLargeError struct {
	Limit int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("response body exceeds the %d-byte limit (--analysis-max-response-bytes)", e.Limit)
}

// limitBodies caps every response body it passes on. Reading past the cap
// fails with *ResponseTooLargeError and calls refused once, so a provider
// cannot be made to buffer an unbounded answer.
type limitBodies struct {
	base    http.RoundTripper
	limit   int64
	refused func()
}

func (t *limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit, refused: t.refused}
	return resp, nil
}

type limitedBody struct {
	rc      io.ReadCloser
	left    int64 // bytes still allowed; -1 once the limit was passed
	limit   int64
	refused func()
	once    sync.Once
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &ResponseTooLargeError{Limit: b.limit}
	}
	// Read one byte more than allowed: seeing it is how we know the body
	// is too large rather than exactly at the limit.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.once.Do(b.refused)
		return n, &ResponseTooLargeError{Limit: b.limit}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// redactURL drops a URL's user info and query, which may hold
// credentials; scheme, host and path stay so the error still says where.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// redactURLError rewrites the URL a *url.Error embeds (net/http puts the
// full request URL into every transport error) wherever it appears in
// err's message, and keeps err's chain for errors.Is and errors.As.
func redactURLError(err error) error {
	var ue *url.Error
	if err == nil || !errors.As(err, &ue) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, redactURL(ue.URL)), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
