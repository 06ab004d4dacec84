package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// TraceID is the id of commit's trace: the first 16 bytes of a SHA-256 of
// the commit hash, so that it is the same in every process and after every
// restart.
func TraceID(commit string) trace.TraceID {
	var id trace.TraceID
	sum := sha256.Sum256([]byte("sluice/trace/" + commit))
	copy(id[:], sum[:])
	return id
}

// SpanID is the id of the span named by parts within a commit's trace
// (e.g. commit, rollout, "step", index). parts must begin with the commit.
func SpanID(parts ...string) trace.SpanID {
	var id trace.SpanID
	sum := sha256.Sum256([]byte("sluice/span/" + strings.Join(parts, "\x00")))
	copy(id[:], sum[:])
	if !id.IsValid() { // all zero: astronomically unlikely, but invalid
		id[7] = 1
	}
	return id
}

// Parent returns ctx with the span (commit, parts...) of commit's trace as
// its remote parent: a span started from it joins that trace below that
// span, whether or not the span was started in this process. The parent is
// marked sampled; the provider's sampler (parent-based by default) decides.
func Parent(ctx context.Context, commit string, parts ...string) context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    TraceID(commit),
		SpanID:     SpanID(append([]string{commit}, parts...)...),
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// fixedKey marks, in a context, the ids the next span started from it must
// take (see Start).
type fixedKey struct{}

type fixedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator gives a span the ids its context fixes, and random ones
// otherwise. The SDK's own generator is unexported, so random ids come from
// math/rand/v2, which is safe for concurrent use and seeded per process.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(fixedKey{}).(fixedIDs); ok {
		return f.trace, f.span
	}
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[:8], rand.Uint64())
	binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(fixedKey{}).(fixedIDs); ok {
		return f.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// Start starts a span named name whose ids are fixed: trace id from commit,
// span id from (commit, parts...), so that other spans can hang below it
// with Parent. The returned context does not fix ids any more: spans
// started from it get random span ids as usual.
func Start(ctx context.Context, tracer trace.Tracer, name, commit string, parts []string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ids := fixedIDs{trace: TraceID(commit), span: SpanID(append([]string{commit}, parts...)...)}
	ctx, span := tracer.Start(context.WithValue(ctx, fixedKey{}, ids), name, opts...)
	return context.WithValue(ctx, fixedKey{}, nil), span
}
