package gitwatch

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const hookSecret = "s3cret-hook-key"

func sign(body []byte) string {
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// hookRequest builds a webhook request the way each forge sends it.
func hookRequest(kind, ref string, body []byte, signed bool) *http.Request {
	if body == nil {
		body = []byte(`{"ref":"` + ref + `","after":"0000"}`)
	}
	sig := sign(body)
	token := hookSecret
	if !signed {
		sig = sign([]byte("something else"))
		token = "wrong-token"
	}
	r := httptest.NewRequest(http.MethodPost, "/hook/"+kind, bytes.NewReader(body))
	switch kind {
	case "github":
		r.Header.Set("X-GitHub-Event", "push")
		r.Header.Set("X-Hub-Signature-256", "sha256="+sig)
	case "gitlab":
		r.Header.Set("X-Gitlab-Event", "Push Hook")
		r.Header.Set("X-Gitlab-Token", token)
	case "gitea":
		r.Header.Set("X-Gitea-Event", "push")
		r.Header.Set("X-Gitea-Signature", sig)
	default:
		r.Header.Set("X-Signature", "sha256="+sig)
	}
	return r
}

func hookWatcher(t testing.TB, secret string) *Watcher {
	t.Helper()
	// New does no I/O, so the paths need not exist.
	w, err := New(Options{Repo: "/nonexistent/repo", CacheDir: "/nonexistent/cache", Branch: "main", WebhookSecret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestHookHandler(t *testing.T) {
	big := append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("x"), MaxHookBody)...)
	big = append(big, `"}`...)
	tests := []struct {
		name    string
		secret  string
		req     func() *http.Request
		code    int
		trigger bool
	}{
		{name: "github push to main", req: func() *http.Request { return hookRequest("github", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "gitlab push to main", req: func() *http.Request { return hookRequest("gitlab", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "gitea push to main", req: func() *http.Request { return hookRequest("gitea", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "generic push to main", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "secret file whitespace is trimmed", secret: "  " + hookSecret + "\n", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 202, trigger: true},
		{name: "github wrong signature", req: func() *http.Request { return hookRequest("github", "refs/heads/main", nil, false) }, code: 401},
		{name: "gitlab wrong token", req: func() *http.Request { return hookRequest("gitlab", "refs/heads/main", nil, false) }, code: 401},
		{name: "gitea wrong signature", req: func() *http.Request { return hookRequest("gitea", "refs/heads/main", nil, false) }, code: 401},
		{name: "generic wrong signature", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, false) }, code: 401},
		{name: "missing signature", req: func() *http.Request {
			r := hookRequest("github", "refs/heads/main", nil, true)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, code: 401},
		{name: "generic signature without sha256= prefix", req: func() *http.Request {
			r := hookRequest("generic", "refs/heads/main", nil, true)
			r.Header.Set("X-Signature", strings.TrimPrefix(r.Header.Get("X-Signature"), "sha256="))
			return r
		}, code: 401},
		{name: "no secret configured rejects everything", secret: " ", req: func() *http.Request { return hookRequest("generic", "refs/heads/main", nil, true) }, code: 401},
		{name: "other branch is accepted and ignored", req: func() *http.Request { return hookRequest("github", "refs/heads/feature", nil, true) }, code: 202},
		{name: "tag push is ignored", req: func() *http.Request { return hookRequest("generic", "refs/tags/v1", nil, true) }, code: 202},
		{name: "github ping is ignored", req: func() *http.Request {
			r := hookRequest("github", "refs/heads/main", nil, true)
			r.Header.Set("X-GitHub-Event", "ping")
			return r
		}, code: 202},
		{name: "signed but not JSON", req: func() *http.Request { return hookRequest("generic", "", []byte("ref=main"), true) }, code: 400},
		{name: "body over 1 MiB", req: func() *http.Request { return hookRequest("generic", "", big, true) }, code: 413},
		{name: "body over 1 MiB without length", req: func() *http.Request {
			r := hookRequest("generic", "", big, true)
			r.ContentLength = -1
			return r
		}, code: 413},
		{name: "unknown type", req: func() *http.Request { return hookRequest("bitbucket", "refs/heads/main", nil, true) }, code: 404},
		{name: "GET is not allowed", req: func() *http.Request { return httptest.NewRequest(http.MethodGet, "/hook/github", nil) }, code: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := tt.secret
			if secret == "" {
				secret = hookSecret
			}
			w := hookWatcher(t, secret)
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, tt.req())
			if rec.Code != tt.code {
				t.Errorf("code %d, want %d; body %s", rec.Code, tt.code, rec.Body)
			}
			if got := w.triggers.Load() > 0; got != tt.trigger {
				t.Errorf("triggered %v, want %v", got, tt.trigger)
			}
		})
	}
}

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// TestForgedHookBodyIsNotRead: a request whose token is wrong or whose
// signature header cannot be a signature is refused on its headers, before
// any of its (up to 1 MiB) body is read.
func TestForgedHookBodyIsNotRead(t *testing.T) {
	tests := []struct{ kind, header, value string }{
		{"github", "X-Hub-Signature-256", ""},
		{"github", "X-Hub-Signature-256", "sha256=not-hex"},
		{"github", "X-Hub-Signature-256", "sha256=00"},
		{"gitlab", "X-Gitlab-Token", "wrong-token"},
		{"gitlab", "X-Gitlab-Token", ""},
		{"gitea", "X-Gitea-Signature", "sha256=" + sign([]byte("x"))},
		{"generic", "X-Signature", sign([]byte("x"))},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.value, func(t *testing.T) {
			body := &countingBody{r: bytes.NewReader(bytes.Repeat([]byte("x"), MaxHookBody-1))}
			r := httptest.NewRequest(http.MethodPost, "/hook/"+tt.kind, body)
			r.Header.Set(tt.header, tt.value)
			rec := httptest.NewRecorder()
			hookWatcher(t, hookSecret).Handler().ServeHTTP(rec, r)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("code %d, want 401", rec.Code)
			}
			if body.read != 0 {
				t.Errorf("%d body bytes read before the request was refused, want 0", body.read)
			}
		})
	}
}

func TestTriggerCoalesces(t *testing.T) {
	w := hookWatcher(t, hookSecret)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, hookRequest("github", "refs/heads/main", nil, true))
			if rec.Code != 202 {
				t.Errorf("code %d", rec.Code)
			}
		}()
	}
	wg.Wait()
	if n := w.triggers.Load(); n != 1 {
		t.Errorf("%d fetches pending after 50 hooks, want 1", n)
	}
}

// TestHookFetchesAtOnce runs the whole path: push, webhook over HTTP,
// fetch, Revision, with polling effectively off.
func TestHookFetchesAtOnce(t *testing.T) {
	u := newUpstream(t)
	c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	opts := testOptions(t, "file://"+u.bare)
	opts.WebhookSecret = []byte(hookSecret)
	h := startWatcher(t, opts)
	if r := h.next(10 * time.Second); r.Commit != c0 {
		t.Fatalf("first revision %s, want %s", r.Commit, c0)
	}
	srv := httptest.NewServer(h.w.Handler())
	t.Cleanup(srv.Close)
	send := func(kind, ref string, signed bool) int {
		t.Helper()
		r := hookRequest(kind, ref, nil, signed)
		req, err := http.NewRequest(http.MethodPost, srv.URL+r.URL.Path, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = r.Header
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, 5*time.Second, "first fetch recorded", func() bool { return fetchCount(t, h.reg, resultOK) == 1 })

	c1 := u.commit("c1", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v2")})
	u.push()
	tests := []struct {
		kind, ref string
		signed    bool
		code      int
	}{
		{"github", "refs/heads/main", false, 401},
		{"gitlab", "refs/heads/main", false, 401},
		{"github", "refs/heads/other", true, 202},
	}
	for _, tt := range tests {
		if code := send(tt.kind, tt.ref, tt.signed); code != tt.code {
			t.Errorf("%s %s signed=%v: code %d, want %d", tt.kind, tt.ref, tt.signed, code, tt.code)
		}
	}
	if n := h.w.triggers.Load(); n != 0 {
		t.Fatalf("rejected or ignored hooks triggered %d fetches", n)
	}
	if n := fetchCount(t, h.reg, resultOK); n != 1 {
		t.Fatalf("%d fetches, want only the first", n)
	}

	start := time.Now()
	if code := send("github", "refs/heads/main", true); code != 202 {
		t.Fatalf("valid hook: code %d", code)
	}
	r := h.next(time.Second)
	if r.Commit != c1 {
		t.Fatalf("revision %s, want %s", r.Commit, c1)
	}
	t.Logf("webhook to revision: %s", time.Since(start))

	// A burst of hooks while nothing changes coalesces into few fetches.
	before := fetchCount(t, h.reg, resultOK)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); send("generic", "refs/heads/main", true) }()
	}
	wg.Wait()
	eventually(t, 5*time.Second, "burst fetched", func() bool { return fetchCount(t, h.reg, resultOK) > before })
	if got := fetchCount(t, h.reg, resultOK) - before; got > 5 {
		t.Errorf("20 concurrent hooks made %d fetches", got)
	}
}

// FuzzHook throws arbitrary requests at the handler, for every forge: it
// must never panic, never answer 5xx, refuse every request whose signature
// or token is wrong (401, or 413 for a body too large to check), and fetch
// only for a genuine push to the watched branch.
func FuzzHook(f *testing.F) {
	signed := []byte(`{"ref":"refs/heads/main"}`)
	mac := sign(signed)
	huge := strings.Repeat("a", 64<<10)
	atLimit := append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("x"), MaxHookBody-36)...)
	atLimit = append(atLimit, `"}`...)
	overLimit := append(bytes.Clone(atLimit[:len(atLimit)-2]), `xx"}`...)
	seeds := []struct {
		kind, sig, event string
		body             []byte
	}{
		// Genuine pushes, one per forge.
		{"github", "sha256=" + mac, "push", signed},
		{"generic", "sha256=" + mac, "", signed},
		{"gitlab", hookSecret, "Push Hook", signed},
		{"gitea", mac, "push", signed},
		// Signatures that are almost right.
		{"github", "sha256=" + strings.ToUpper(mac), "push", signed},
		{"github", "sha256=" + mac + " ", "push", signed},
		{"github", mac, "push", signed},
		{"gitea", "sha256=" + mac, "push", signed},
		{"generic", "sha256=sha256=" + mac, "", signed},
		{"generic", "sha256=" + mac[:63], "", signed},
		{"generic", "sha256=" + mac + "00", "", signed},
		{"generic", "sha256=" + sign(append(bytes.Clone(signed), ' ')), "", signed},
		{"gitlab", hookSecret + "\n", "Push Hook", signed},
		{"gitlab", " " + hookSecret, "Push Hook", signed},
		{"gitlab", "", "Push Hook", signed},
		{"github", "sha256=00", "push", []byte(`{"ref":1}`)},
		{"generic", "", "", []byte{0xff, 0x00}},
		// Huge headers and bodies.
		{"github", "sha256=" + huge, "push", signed},
		{"gitlab", huge, huge, signed},
		{"generic", "sha256=" + sign(atLimit), "", atLimit},
		{"generic", "sha256=" + sign(overLimit), "", overLimit},
		// Genuine signatures over hostile bodies.
		{"generic", "sha256=" + sign([]byte(`[]`)), "", []byte(`[]`)},
		{"generic", "sha256=" + sign([]byte(`{"ref":{"a":1}}`)), "", []byte(`{"ref":{"a":1}}`)},
		{"generic", "sha256=" + sign(bytes.Repeat([]byte("["), 20000)), "", bytes.Repeat([]byte("["), 20000)},
		{"github", "sha256=" + sign([]byte(`{"ref":"refs/heads/main","ref":"refs/heads/x"}`)), "push", []byte(`{"ref":"refs/heads/main","ref":"refs/heads/x"}`)},
		{"github", "sha256=" + mac, "ping", signed},
		// Paths that are not a forge.
		{"../x", "sha256=zz", "push", []byte(`[]`)},
		{"GitHub", "sha256=" + mac, "push", signed},
		{"github/../generic", "sha256=" + mac, "push", signed},
	}
	for _, s := range seeds {
		f.Add(s.kind, s.sig, s.event, s.body)
	}
	f.Fuzz(func(t *testing.T, kind, sig, event string, body []byte) {
		w := hookWatcher(t, hookSecret)
		r := httptest.NewRequest(http.MethodPost, "/hook/x", bytes.NewReader(body))
		r.URL.Path = "/hook/" + kind
		for _, h := range []string{"X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Signature"} {
			r.Header.Set(h, sig)
		}
		for _, h := range []string{"X-GitHub-Event", "X-Gitlab-Event", "X-Gitea-Event"} {
			r.Header.Set(h, event)
		}
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, r)
		if rec.Code >= 500 {
			t.Fatalf("code %d", rec.Code)
		}
		genuine, known := genuineHook(kind, sig, body)
		if known && !genuine && rec.Code != http.StatusUnauthorized && rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s hook with a wrong signature %q answered %d, want 401", kind, sig, rec.Code)
		}
		if w.triggers.Load() == 0 {
			return
		}
		if !genuine {
			t.Fatalf("unsigned request (kind %q, sig %q) triggered a fetch", kind, sig)
		}
		var p struct{ Ref any }
		if json.Unmarshal(body, &p) != nil || p.Ref != "refs/heads/main" {
			t.Fatalf("a hook for %v triggered a fetch of main", p.Ref)
		}
	})
}

// genuineHook is the test's own reading of the forges' rules: whether sig
// is what kind's forge would send for body with hookSecret, and whether
// kind names a forge at all.
func genuineHook(kind, sig string, body []byte) (genuine, known bool) {
	hexMatches := func(s string) bool {
		got, err := hex.DecodeString(s)
		return err == nil && hmac.Equal(got, []byte(mustHex(sign(body))))
	}
	switch kind {
	case "github", "generic":
		rest, ok := strings.CutPrefix(sig, "sha256=")
		return ok && hexMatches(rest), true
	case "gitea":
		return hexMatches(sig), true
	case "gitlab":
		return sig == hookSecret, true
	}
	return false, false
}

func mustHex(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
