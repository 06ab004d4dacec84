package gitwatch

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxHookBody is the largest webhook body accepted (DESIGN §5).
const MaxHookBody = 1 << 20

// hookKind verifies and reads one forge's webhooks.
type hookKind struct {
	// credential checks what the headers alone can prove, before any of
	// the body is read. A signature kind returns the HMAC-SHA256 the body
	// must hash to; a token kind compares the token (in constant time) and
	// returns a nil MAC. ok is false when the request cannot be genuine.
	credential func(h http.Header, secret []byte) (mac []byte, ok bool)
	// push says whether the request is a push event.
	push func(h http.Header) bool
}

// lookupHook returns the hook kind of a /hook/{type} path.
func lookupHook(name string) (hookKind, bool) {
	switch name {
	case "github":
		return hookKind{
			credential: func(h http.Header, _ []byte) ([]byte, bool) {
				return prefixedMAC(h.Get("X-Hub-Signature-256"))
			},
			push: func(h http.Header) bool { return h.Get("X-GitHub-Event") == "push" },
		}, true
	case "gitlab":
		return hookKind{
			credential: func(h http.Header, secret []byte) ([]byte, bool) {
				// A shared token, not a signature: compare digests so the
				// comparison takes the same time whatever the lengths.
				tok := h.Get("X-Gitlab-Token")
				got, want := sha256.Sum256([]byte(tok)), sha256.Sum256(secret)
				return nil, tok != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
			},
			push: func(h http.Header) bool { return h.Get("X-Gitlab-Event") == "Push Hook" },
		}, true
	case "gitea":
		return hookKind{
			credential: func(h http.Header, _ []byte) ([]byte, bool) {
				return decodeMAC(h.Get("X-Gitea-Signature"))
			},
			push: func(h http.Header) bool {
				e := h.Get("X-Gitea-Event")
				return e == "" || e == "push"
			},
		}, true
	case "generic":
		return hookKind{
			credential: func(h http.Header, _ []byte) ([]byte, bool) {
				return prefixedMAC(h.Get("X-Signature"))
			},
			push: func(http.Header) bool { return true },
		}, true
	}
	return hookKind{}, false
}

// prefixedMAC decodes a "sha256=<hex>" signature header.
func prefixedMAC(v string) ([]byte, bool) {
	sig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return nil, false
	}
	return decodeMAC(sig)
}

// decodeMAC decodes a hex HMAC-SHA256; anything else cannot match.
func decodeMAC(sig string) ([]byte, bool) {
	mac, err := hex.DecodeString(sig)
	if err != nil || len(mac) != sha256.Size {
		return nil, false
	}
	return mac, true
}

// Reasons readVerified gives for not returning a body.
var (
	errHookTooLarge = errors.New("body over 1 MiB")
	errHookBadMAC   = errors.New("bad or missing signature")
)

// readVerified reads the body, at most MaxHookBody bytes, hashing it as it
// arrives, and returns it only when it hashes to want (a nil want means
// the kind's token was checked already). Nothing parses the body before
// this returns it.
func readVerified(rw http.ResponseWriter, r *http.Request, secret, want []byte) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength)) // at most MaxHookBody: checked before
	}
	mac := hmac.New(sha256.New, secret)
	_, err := buf.ReadFrom(io.TeeReader(http.MaxBytesReader(rw, r.Body, MaxHookBody), mac))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, errHookTooLarge
	case err != nil:
		return nil, fmt.Errorf("read body: %w", err)
	case want != nil && !hmac.Equal(want, mac.Sum(nil)):
		return nil, errHookBadMAC
	}
	return buf.Bytes(), nil
}

// Handler serves POST /hook/{type} (github, gitlab, gitea, generic); mount
// it on "/hook/". Order of checks: declared size (413); token, or a
// well-formed signature header (401, before the body is read); the body,
// read within 1 MiB (413) and hashed as it arrives, against the signature
// (401, nothing parsed or fetched); then the event and branch (202 either
// way; only a push to the watched branch triggers a fetch). Concurrent
// hooks coalesce into one fetch. The caller bounds how many are served at
// once and how long a body may take (httpapi.Limits).
func (w *Watcher) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{type}", w.serveHook)
	return mux
}

type hookReply struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (w *Watcher) serveHook(rw http.ResponseWriter, r *http.Request) {
	kind, ok := lookupHook(r.PathValue("type"))
	if !ok {
		reply(rw, http.StatusNotFound, "error", "unknown hook type (github, gitlab, gitea, generic)")
		return
	}
	if r.ContentLength > MaxHookBody {
		reply(rw, http.StatusRequestEntityTooLarge, "error", errHookTooLarge.Error())
		return
	}
	secret := w.cfg.WebhookSecret
	want, ok := kind.credential(r.Header, secret)
	if len(secret) == 0 || !ok {
		// Refused on the headers alone: the body is not even read.
		reply(rw, http.StatusUnauthorized, "error", errHookBadMAC.Error())
		return
	}
	body, err := readVerified(rw, r, secret, want)
	switch {
	case errors.Is(err, errHookTooLarge):
		reply(rw, http.StatusRequestEntityTooLarge, "error", err.Error())
		return
	case errors.Is(err, errHookBadMAC):
		reply(rw, http.StatusUnauthorized, "error", err.Error())
		return
	case err != nil:
		reply(rw, http.StatusBadRequest, "error", "cannot read body")
		return
	}
	if !kind.push(r.Header) {
		reply(rw, http.StatusAccepted, "ignored", "not a push event")
		return
	}
	var payload struct {
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(body, &payload); err != nil {
		reply(rw, http.StatusBadRequest, "error", "body is not a JSON object with a ref")
		return
	}
	if branch := w.followedBranch(); branch != "" && payload.Ref != "refs/heads/"+branch {
		reply(rw, http.StatusAccepted, "ignored", "not the watched branch")
		return
	}
	w.Trigger()
	reply(rw, http.StatusAccepted, "accepted", "")
}

// followedBranch is the configured or resolved branch; "" until the remote
// HEAD is known, when every push triggers a fetch.
func (w *Watcher) followedBranch() string {
	if w.cfg.Branch != "" {
		return w.cfg.Branch
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status.Branch
}

func reply(rw http.ResponseWriter, code int, status, reason string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(hookReply{Status: status, Reason: reason})
}
