package httpapi

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/dashboard"
	"github.com/sluice-dev/sluice/controller/hostcheck"
)

// Options configure the API handler.
type Options struct {
	Backend Backend
	// Ready reports readiness for /readyz (first sync done, xDS serving);
	// nil means always ready. A non-nil error is the 503 body.
	Ready func() error
	// Registry is served at /metrics; nil serves an empty registry.
	Registry *prometheus.Registry
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// write calls.
	Token string
	// ReadToken, when set, is required on the read calls (status, recent
	// events, the event stream), as a bearer token or in TokenCookie; the
	// write token is taken too. It needs Token: reads cannot be guarded
	// more than writes.
	ReadToken string
	// AllowedHosts are the host names (or "*.example.com") served beyond
	// localhost and IP literals; any other Host is answered 421, against
	// DNS rebinding (controller/hostcheck).
	AllowedHosts []string
	// TrustedOrigins are origins ("https://sluice.example.com") whose
	// cross-origin writes are taken, for a proxy that changes Host.
	TrustedOrigins []string
	// Hook is mounted at /hook/ (gitwatch's webhook handler); nil answers
	// 404 there.
	Hook http.Handler
	// Heartbeat is the SSE keep-alive comment interval (default 15s), so
	// proxies and clients see a live stream.
	Heartbeat time.Duration
	// MaxBodyBytes bounds the body of API write calls (default 64 KiB);
	// commands carry no body, so anything large is refused with 413.
	MaxBodyBytes int64
	// Limits bound what clients can hold: the server timeouts (applied by
	// NewServer), concurrent webhooks and event streams. Refusals are
	// counted in sluice_http_refused_total{reason} on Registry.
	Limits Limits
	Logger *slog.Logger
}

// Handler is the HTTP API. It is safe for concurrent use.
type Handler struct {
	mux       *http.ServeMux
	backend   Backend
	ready     func() error
	token     *tokenChecker
	readToken *tokenChecker
	origins   *http.CrossOriginProtection
	served    http.Handler // mux behind the Host check
	heartbeat time.Duration
	maxBody   int64
	limits    Limits
	refused   *prometheus.CounterVec
	streams   streamSlots
	perClient *clientStreams
	log       *slog.Logger
	// closing ends every event stream: http.Server.Shutdown waits for
	// requests to finish, and a stream never does on its own.
	closing   chan struct{}
	closeOnce sync.Once
}

var _ http.Handler = (*Handler)(nil)

// New validates opts and builds the handler.
func New(opts Options) (*Handler, error) {
	if opts.Backend == nil {
		return nil, errors.New("httpapi: no backend")
	}
	if opts.Ready == nil {
		opts.Ready = func() error { return nil }
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 64 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.ReadToken != "" && opts.Token == "" {
		return nil, errors.New("httpapi: --api-read-token-file needs --api-token-file: writes would need no token while reads do")
	}
	hosts, err := hostcheck.New("--api-allowed-hosts", opts.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	origins, err := newOriginCheck(opts.TrustedOrigins)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	refused, err := newRefused(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	h := &Handler{
		mux:       http.NewServeMux(),
		backend:   opts.Backend,
		ready:     opts.Ready,
		token:     newTokenChecker(opts.Token),
		readToken: newTokenChecker(opts.ReadToken),
		origins:   origins,
		heartbeat: opts.Heartbeat,
		maxBody:   opts.MaxBodyBytes,
		limits:    opts.Limits,
		refused:   refused,
		streams:   make(streamSlots, opts.Limits.MaxEventStreams),
		perClient: newClientStreams(opts.Limits.MaxEventStreamsPerClient),
		log:       opts.Logger,
		closing:   make(chan struct{}),
	}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("GET /api/v1/rollouts", h.reads(h.list))
	h.mux.HandleFunc("GET /api/v1/rollouts/{namespace}/{name}", h.reads(h.get))
	h.mux.HandleFunc("GET /api/v1/rollouts/{namespace}/{name}/events", h.reads(h.recent))
	h.mux.HandleFunc("POST /api/v1/rollouts/{namespace}/{name}/{command}", h.command)
	h.mux.HandleFunc("GET /api/v1/events", h.reads(h.events))
	h.mux.HandleFunc("GET /api/v1/info", h.info)
	h.mux.Handle("GET "+dashboard.Prefix, dashboard.Handler())
	h.mux.Handle("GET /{$}", http.RedirectHandler(dashboard.Prefix, http.StatusFound))
	if f, ok := opts.Backend.(Follower); ok {
		opts.Hook = refuseHooks(f)
	}
	if opts.Hook != nil {
		h.mux.Handle("/hook/", h.limitHooks(opts.Hook))
	}
	h.served = hosts.Handler(h.mux, "the names in --api-allowed-hosts", hostExempt)
	return h, nil
}

// CloseStreams ends the open event streams and makes new ones end at once.
// Register it with http.Server.RegisterOnShutdown so that a graceful
// shutdown does not wait for clients that follow the stream.
func (h *Handler) CloseStreams() { h.closeOnce.Do(func() { close(h.closing) }) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.served.ServeHTTP(w, r) }

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := h.ready(); err != nil {
		text(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	text(w, http.StatusOK, "ok")
}

// Info is the body of GET /api/v1/info: what a client must know about the
// server before it sends commands.
type Info struct {
	// TokenRequired: commands need "Authorization: Bearer <token>".
	TokenRequired bool `json:"tokenRequired"`
	// ReadTokenRequired: reads (status, events, the event stream) need a
	// token too, the read token or the write token.
	ReadTokenRequired bool `json:"readTokenRequired,omitempty"`
	// Following: this replica does not lead (--leader-elect); it serves
	// reads and refuses writes with 503. Leader is the replica that leads,
	// when known.
	Following bool   `json:"following,omitempty"`
	Leader    string `json:"leader,omitempty"`
}

func (h *Handler) info(w http.ResponseWriter, _ *http.Request) {
	info := Info{TokenRequired: h.token.on, ReadTokenRequired: h.readToken.on}
	if f, ok := h.backend.(Follower); ok {
		info.Following, info.Leader = true, f.Leader()
	}
	writeJSON(w, http.StatusOK, info)
}

// List is the body of GET /api/v1/rollouts.
type List struct {
	Items []RolloutStatus `json:"items"`
}

func (h *Handler) list(w http.ResponseWriter, _ *http.Request) {
	items := h.backend.List()
	if items == nil {
		items = []RolloutStatus{}
	}
	slices.SortFunc(items, func(a, b RolloutStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	writeList(w, items)
}

// writeList writes List{Items: items} as writeJSON would, byte for byte,
// but one item at a time through a small buffer. Marshalled whole, the
// body was held about three times over (the encoder's buffer, the result,
// its copy with the newline): 25.8 MB for a 9.0 MB list of 10,000
// statuses, 36 KB streamed (BenchmarkListResponse); 58 MB of heap in use
// at 10,000 rollouts in Kubernetes mode (a heap profile of go run
// ./e2e/scale -kube, whose poll reads the list). A RolloutStatus always
// encodes (no channels, functions or floats), so the status line, written
// first, cannot turn out wrong.
func writeList(w http.ResponseWriter, items []RolloutStatus) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"items":[`)
	for i := range items {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		b, err := json.Marshal(&items[i])
		if err != nil {
			return // cut short: the client sees JSON that does not parse
		}
		_, _ = bw.Write(b)
	}
	_, _ = bw.WriteString("]}\n")
	_ = bw.Flush()
}

func pathKey(r *http.Request) api.Key {
	return api.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r)
	st, ok := h.backend.Get(key)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("rollout %s: %w", key, ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// Events is the body of GET /api/v1/rollouts/{namespace}/{name}/events.
type Events struct {
	Items []Event `json:"items"`
}

func (h *Handler) recent(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r)
	if _, ok := h.backend.Get(key); !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("rollout %s: %w", key, ErrNotFound))
		return
	}
	items := []Event{}
	if hist, ok := h.backend.(History); ok {
		items = append(items, hist.Recent(key)...)
	}
	writeJSON(w, http.StatusOK, Events{Items: items})
}

func (h *Handler) command(w http.ResponseWriter, r *http.Request) {
	if h.writeRefused(w, r) {
		return
	}
	if !h.token.allowed(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token"))
		return
	}
	if !h.drainBody(w, r) {
		return
	}
	verb := r.PathValue("command")
	full := false
	if f := r.URL.Query().Get("full"); f != "" {
		var err error
		full, err = strconv.ParseBool(f)
		if err != nil || verb != "promote" {
			writeError(w, http.StatusBadRequest, fmt.Errorf("full=%q: only promote takes full=true|false", f))
			return
		}
	}
	cmd, ok := commandOf(verb, full)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown command %q", verb))
		return
	}
	key := pathKey(r)
	st, err := h.backend.Command(r.Context(), key, cmd)
	var notLeader *NotLeaderError
	if errors.As(err, &notLeader) {
		writeNotLeader(w, notLeader)
		return
	}
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNotFound):
			code = http.StatusNotFound
		case errors.Is(err, ErrNotAllowed):
			code = http.StatusConflict
		case errors.Is(err, ErrBadCommand):
			code = http.StatusBadRequest
		}
		h.log.Warn("command refused", "rollout", key.String(), "command", cmd.Kind, "err", err, "status", code)
		writeError(w, code, err)
		return
	}
	h.log.Info("command", "rollout", key.String(), "command", cmd.Kind, "remote", r.RemoteAddr, "phase", st.Phase)
	writeJSON(w, http.StatusOK, st)
}

// drainBody reads and discards the (unused) request body within the limit,
// answering 413 when it is larger.
func (h *Handler) drainBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > h.maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", h.maxBody))
		return false
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", h.maxBody))
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read body: %w", err))
		return false
	}
	return true
}

// errorBody is the JSON body of every error answer of the API.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

func text(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s+"\n")
}
