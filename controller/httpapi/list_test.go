package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestListStreamedAsMarshalled: the list, written one item at a time, is
// the bytes json.Marshal gives for the whole (writeJSON's), HTML escapes
// included, and an empty list is an empty array.
func TestListStreamedAsMarshalled(t *testing.T) {
	a, b := goldenStatus(t), goldenStatus(t)
	b.Name, b.Message = "cart", `step 2/6: <pause> & "wait"`
	for _, items := range [][]RolloutStatus{{}, {a}, {a, b}} {
		rec := httptest.NewRecorder()
		writeList(rec, items)
		want, err := json.Marshal(List{Items: items})
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("%d items: streamed\n%s\nwant\n%s", len(items), got, want)
		}
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%d items: code %d, headers %v", len(items), rec.Code, rec.Header())
		}
	}
}

// BenchmarkListResponse writes the list of 10,000 rollouts (the golden
// status each) as one body (writeJSON, as the list did) and one item at a
// time (writeList). heldB is the most live heap the writing held over the
// statuses themselves, sampled after a GC at every write to the
// connection; bodyB is the body's size.
func BenchmarkListResponse(b *testing.B) {
	items := make([]RolloutStatus, 10000)
	for i := range items {
		items[i] = goldenStatus(b)
		items[i].Name = fmt.Sprintf("svc-%05d", i)
	}
	for _, c := range []struct {
		name  string
		write func(http.ResponseWriter)
	}{
		{"whole", func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, List{Items: items}) }},
		{"streamed", func(w http.ResponseWriter) { writeList(w, items) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var w *heldWriter
			for b.Loop() {
				w = &heldWriter{header: http.Header{}, base: heapAfterGC()}
				c.write(w)
			}
			b.ReportMetric(float64(w.held), "heldB")
			b.ReportMetric(float64(w.body), "bodyB")
		})
	}
}

// heldWriter discards the body and samples the live heap at every write.
type heldWriter struct {
	header           http.Header
	base, held, body uint64
}

func (w *heldWriter) Header() http.Header { return w.header }
func (w *heldWriter) WriteHeader(int)     {}
func (w *heldWriter) Write(p []byte) (int, error) {
	if h := heapAfterGC(); h > w.base {
		w.held = max(w.held, h-w.base)
	}
	w.body += uint64(len(p))
	return len(p), nil
}
