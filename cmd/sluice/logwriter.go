package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logFlushEvery is how long a log line of the daemon may wait in its
// buffer before it is written.
const logFlushEvery = 100 * time.Millisecond

// logWriter buffers the daemon's log lines and writes them out together,
// at most logFlushEvery after the first of them. A commit of a thousand
// rollouts logs some ten thousand lines within a second, and a write
// system call for each was ~5 % of the commit's CPU (docs/scale.md). A line
// at WARN or above is written at once with those before it (flushOnWarn),
// and the rest when the daemon stops: what a crash can lose is the last
// tenth of a second of INFO and DEBUG lines. (klog, which Kubernetes'
// components log through, holds its lines for up to 5 s.)
type logWriter struct {
	mu    sync.Mutex
	buf   *bufio.Writer
	every time.Duration
	timer *time.Timer // armed while lines wait
}

func newLogWriter(w io.Writer, every time.Duration) *logWriter {
	return &logWriter{buf: bufio.NewWriterSize(w, 64<<10), every: every}
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	if l.timer == nil && l.buf.Buffered() > 0 {
		l.timer = time.AfterFunc(l.every, func() { _ = l.Flush() })
	}
	return n, err
}

// Flush writes every waiting line.
func (l *logWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	return l.buf.Flush()
}

// flushOnWarn writes a record at WARN or above, and the lines before it,
// as soon as it is logged.
type flushOnWarn struct {
	slog.Handler
	w *logWriter
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(attrs), h.w}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.w}
}
