package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// events serves GET /api/v1/events as server-sent events: one "data:" line
// holding one Event as JSON per event, its Seq as the SSE id, and a comment
// line every heartbeat. ?rollout=ns/name (or name) limits the stream to one
// rollout. Beyond Limits.MaxEventStreams open streams, or
// Limits.MaxEventStreamsPerClient of one client, it answers 503.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	var only *api.Key
	if s := r.URL.Query().Get("rollout"); s != "" {
		k := api.ParseKey(s)
		only = &k
	}
	client := clientOf(r)
	if !h.perClient.take(client) {
		h.refused.WithLabelValues(refusedClientStreamsFull).Inc()
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%d event streams open from %s: close one (--http-max-event-streams-per-client)",
			h.limits.MaxEventStreamsPerClient, client))
		return
	}
	defer h.perClient.release(client)
	if !h.streams.take() {
		h.refused.WithLabelValues(refusedEventStreamsFull).Inc()
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%d event streams open: try again later", h.limits.MaxEventStreams))
		return
	}
	defer h.streams.release()
	rc := http.NewResponseController(w)
	// The server's write timeout must not cut a long-lived stream. (Its
	// read timeout does not: net/http clears the read deadline once the
	// request body is read.)
	_ = rc.SetWriteDeadline(time.Time{})
	ctx := r.Context()
	ch := h.backend.Subscribe(ctx)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": sluice events\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	ew := newEventWriter(w)
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.closing:
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		case e, ok := <-ch:
			if !ok || !h.writeEvent(ew, e, only) {
				return
			}
			// The events already waiting go out in the same flush: a
			// commit publishes thousands within a second, and a flush per
			// event was a write system call each.
			for range maxEventsPerFlush {
				e, ok, ready := nextReady(ch)
				if !ready {
					break
				}
				if !ok || !h.writeEvent(ew, e, only) {
					return
				}
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// maxEventsPerFlush bounds the events written after the first before a
// flush, so that a steady flood still reaches the client in pieces.
const maxEventsPerFlush = 256

// nextReady takes an event from ch if one is waiting; ready is false when
// none is (the channel's ok is then meaningless).
func nextReady(ch <-chan Event) (e Event, ok, ready bool) {
	select {
	case e, ok = <-ch:
		return e, ok, true
	default:
		return Event{}, false, false
	}
}

// writeEvent writes e as one server-sent event unless only names another
// rollout; false when the client is gone.
func (h *Handler) writeEvent(w *eventWriter, e Event, only *api.Key) bool {
	if only != nil && e.Key() != *only {
		return true
	}
	w.buf.Reset()
	fmt.Fprintf(&w.buf, "id: %d\ndata: ", e.Seq)
	// The encoder emits no newline inside the JSON and one after it, so
	// one data line is one event.
	if err := w.enc.Encode(e); err != nil {
		h.log.Error("encode event", "err", err)
		return true
	}
	w.buf.WriteByte('\n')
	_, err := w.w.Write(w.buf.Bytes())
	return err == nil
}

// eventWriter is one stream's encoder and buffer, kept for its life: a
// commit of a thousand rollouts sends thousands of events, and a new
// marshalled copy of each was garbage at once.
type eventWriter struct {
	w   http.ResponseWriter
	buf bytes.Buffer
	enc *json.Encoder
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	ew := &eventWriter{w: w}
	ew.enc = json.NewEncoder(&ew.buf)
	return ew
}
