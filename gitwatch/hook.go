package gitwatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// MaxHookBody is the largest webhook body accepted (DESIGN §5).
const MaxHookBody = 1 << 20

// hookKind verifies and reads one forge's webhooks.
type hookKind struct {
	// verify checks the request's signature or token against secret, in
	// constant time. It runs before the body is parsed.
	verify func(h http.Header, body, secret []byte) bool
	// push says whether the request is a push event.
	push func(h http.Header) bool
}

// lookupHook returns the hook kind of a /hook/{type} path.
func lookupHook(name string) (hookKind, bool) {
	switch name {
	case "github":
		return hookKind{
			verify: func(h http.Header, body, secret []byte) bool {
				sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
				return ok && checkHMAC(sig, body, secret)
			},
			push: func(h http.Header) bool { return h.Get("X-GitHub-Event") == "push" },
		}, true
	case "gitlab":
		return hookKind{
			verify: func(h http.Header, _, secret []byte) bool {
				// A shared token, not a signature: compare digests so the
				// comparison takes the same time whatever the lengths.
				got := sha256.Sum256([]byte(h.Get("X-Gitlab-Token")))
				want := sha256.Sum256(secret)
				return h.Get("X-Gitlab-Token") != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
			},
			push: func(h http.Header) bool { return h.Get("X-Gitlab-Event") == "Push Hook" },
		}, true
	case "gitea":
		return hookKind{
			verify: func(h http.Header, body, secret []byte) bool {
				return checkHMAC(h.Get("X-Gitea-Signature"), body, secret)
			},
			push: func(h http.Header) bool {
				e := h.Get("X-Gitea-Event")
				return e == "" || e == "push"
			},
		}, true
	case "generic":
		return hookKind{
			verify: func(h http.Header, body, secret []byte) bool {
				sig, ok := strings.CutPrefix(h.Get("X-Signature"), "sha256=")
				return ok && checkHMAC(sig, body, secret)
			},
			push: func(http.Header) bool { return true },
		}, true
	}
	return hookKind{}, false
}

// checkHMAC compares a hex HMAC-SHA256 of body with sig in constant time.
func checkHMAC(sig string, body, secret []byte) bool {
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Handler serves POST /hook/{type} (github, gitlab, gitea, generic); mount
// it on "/hook/". Order of checks: size (413), signature or token (401,
// nothing parsed or fetched), then the event and branch (202 either way;
// only a push to the watched branch triggers a fetch). Concurrent hooks
// coalesce into one fetch.
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
		reply(rw, http.StatusRequestEntityTooLarge, "error", "body over 1 MiB")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxHookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(rw, http.StatusRequestEntityTooLarge, "error", "body over 1 MiB")
			return
		}
		reply(rw, http.StatusBadRequest, "error", "cannot read body")
		return
	}
	secret := w.cfg.WebhookSecret
	if len(secret) == 0 || !kind.verify(r.Header, body, secret) {
		reply(rw, http.StatusUnauthorized, "error", "bad or missing signature")
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
