package alert

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL shows a sink URL without what may be secret: user info is
// dropped, and a path or query becomes "…", because Slack and many
// webhook receivers put their credential in the path
// (https://hooks.slack.com/services/T0/B0/XXX → https://hooks.slack.com/…).
// Scheme, host and port stay, so a log line still says where.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		out += "/…"
	}
	return out
}

// redactError replaces the URL a *url.Error embeds (net/http puts the
// full request URL into every transport error) wherever it appears in
// err's message, and keeps err's chain for errors.Is and errors.As.
func redactError(err error) error {
	var ue *url.Error
	if err == nil || !errors.As(err, &ue) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, RedactURL(ue.URL)), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
