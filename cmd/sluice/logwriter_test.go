package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestLogWriterHoldsLinesBriefly: INFO lines reach standard error together
// within the flush interval, not one write each and not never; a WARN line
// goes out at once with the lines before it; Flush writes what waits.
func TestLogWriterHoldsLinesBriefly(t *testing.T) {
	const every = 200 * time.Millisecond
	out := &testkit.SyncBuffer{} // standard error as the test sees it
	w := newLogWriter(out, every)
	log := slog.New(flushOnWarn{slog.NewTextHandler(w, nil), w})

	start := time.Now()
	log.Info("first")
	log.Info("second")
	if got := out.String(); got != "" && time.Since(start) < every/2 {
		t.Fatalf("written at once: %q", got)
	}
	for !strings.Contains(out.String(), "second") {
		if time.Since(start) > 5*every {
			t.Fatalf("INFO lines not written %v after: %q", 5*every, out.String())
		}
		time.Sleep(every / 10)
	}
	if !strings.Contains(out.String(), "first") {
		t.Fatalf("first line lost: %q", out.String())
	}

	log.Info("before the warning")
	log.Warn("the warning", slog.String("k", "v"))
	got := out.String()
	if !strings.Contains(got, "before the warning") || !strings.Contains(got, "the warning") {
		t.Fatalf("a WARN line did not go out at once with the line before it: %q", got)
	}
	// A logger with attributes keeps the rule.
	log.With("rollout", "shop/cart").Error("an error")
	if !strings.Contains(out.String(), "an error") {
		t.Fatalf("an ERROR line of a derived logger waited: %q", out.String())
	}

	log.Info("last")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "last") {
		t.Fatalf("Flush left a line behind: %q", out.String())
	}
}
