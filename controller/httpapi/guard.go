package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// ClientHeader marks a write call as coming from a program that sets its
// own headers (the sluice client commands, the dashboard's fetch, curl
// -H): an HTML form cannot send it, and a script on another origin that
// tries must first pass a CORS preflight, which sluice never grants. Any
// non-empty value will do; the client commands send "sluice-cli", the
// dashboard "dashboard". "Content-Type: application/json" is accepted
// instead, for the same reason.
const ClientHeader = "X-Sluice-Client"

// TokenCookie is where the dashboard keeps the token for its reads: the
// browser's EventSource cannot send an Authorization header. The cookie
// authorises reads only, never a write, so it gives a forged request
// nothing to act with.
const TokenCookie = "sluice-token"

// newOriginCheck is net/http's CrossOriginProtection (Go 1.25): a write
// whose Sec-Fetch-Site is cross-site or same-site, or whose Origin names
// another host than the request's Host, is refused unless its origin is
// one of trusted ("https://sluice.example.com", for a proxy that rewrites
// Host). Requests with neither header are not from a browser and pass.
func newOriginCheck(trusted []string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("--api-trusted-origins %q: %w", o, err)
		}
	}
	return c, nil
}

// writeRefused answers 403 and returns true when a write call could have
// been made by a page on another site: its origin is foreign, or it is a
// request an HTML form could send (no ClientHeader, no JSON type).
func (h *Handler) writeRefused(w http.ResponseWriter, r *http.Request) bool {
	if err := h.origins.Check(r); err != nil {
		h.log.Warn("cross-origin write refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"),
			"sec-fetch-site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, fmt.Errorf("cross-origin request refused (%v): writes are taken from the "+
			"dashboard's own origin, the sluice client commands, or an origin in --api-trusted-origins", err))
		return true
	}
	if r.Header.Get(ClientHeader) == "" && !jsonBody(r) {
		writeError(w, http.StatusForbidden, errors.New("a write call needs the header "+ClientHeader+
			" (any value) or Content-Type: application/json, which an HTML form cannot send; "+
			"the sluice client commands and the dashboard send it, e.g. curl -H '"+ClientHeader+": curl'"))
		return true
	}
	return false
}

func jsonBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// readAllowed says whether a read call may be answered: always without a
// read token; else it needs the read token or the write token, as a
// bearer token or in the dashboard's TokenCookie.
func (h *Handler) readAllowed(r *http.Request) bool {
	if !h.readToken.on {
		return true
	}
	if tok, ok := bearer(r); ok {
		return h.readToken.matches(tok) || h.token.matches(tok)
	}
	c, err := r.Cookie(TokenCookie)
	if err != nil {
		return false
	}
	tok, err := url.PathUnescape(c.Value)
	if err != nil {
		return false
	}
	tok = strings.TrimSpace(tok)
	return h.readToken.matches(tok) || h.token.matches(tok)
}

// reads wraps a read handler with the read token check: 401 without it.
func (h *Handler) reads(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.readAllowed(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token: reads need the read token or the write token"))
			return
		}
		next(w, r)
	}
}

// hostExempt are the paths served whatever the Host: the probes carry no
// data and act on nothing (and kubelet may probe by any name), and the
// webhooks prove themselves with the forge's secret, which a rebound page
// does not have, and arrive under the public name of a proxy.
func hostExempt(r *http.Request) bool {
	p := r.URL.Path
	return p == "/healthz" || p == "/readyz" || strings.HasPrefix(p, "/hook/")
}
