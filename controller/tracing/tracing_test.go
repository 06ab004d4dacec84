package tracing

import (
	"context"
	"errors"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestEnabled(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{"nothing set", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false, false},
		{"sdk disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := enabled(func(k string) string { return tt.env[k] })
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("enabled = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesUnknownProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := New(context.Background(), Options{}); !errors.Is(err, errProtocol) {
		t.Fatalf("New with http/json: %v, want errProtocol", err)
	}
}

func TestNewIsOffByDefault(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(k, "")
	}
	p, err := New(context.Background(), Options{})
	if err != nil || p.Enabled() {
		t.Fatalf("New with no OTEL_* set: enabled %v, err %v; want off", p != nil && p.Enabled(), err)
	}
	_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "x")
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Errorf("the off provider made a real span")
	}
}

// TestSpansJoinTheCommitTrace checks, with the real SDK, that a span
// started with Start takes the ids derived from its commit, that another
// process (a fresh provider, as after a restart) hangs a span below it with
// Parent alone, and that spans below Start's span get their own ids.
func TestSpansJoinTheCommitTrace(t *testing.T) {
	const commit = "9f8d111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	newProvider := func() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
		rec := tracetest.NewSpanRecorder()
		return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(idGenerator{}))
	}
	rec1, tp1 := newProvider()
	tracer := tp1.Tracer("t")
	ctx, root := Start(context.Background(), tracer, "commit", commit, nil)
	_, change := Start(ctx, tracer, "rollout.change", commit, []string{"default/checkout"})
	_, plain1 := tracer.Start(ctx, "diff")
	_, plain2 := tracer.Start(ctx, "load")
	plain2.End()
	plain1.End()
	change.End()
	root.End()

	rec2, tp2 := newProvider() // "after a restart"
	_, step := tp2.Tracer("t").Start(Parent(context.Background(), commit, "default/checkout"), "step")
	step.End()

	ended := append(rec1.Ended(), rec2.Ended()...)
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = s
	}
	tests := []struct {
		span       string
		wantSpanID string // "" for a random one
		wantParent string // "" for none
	}{
		{"commit", SpanID(commit).String(), ""},
		{"rollout.change", SpanID(commit, "default/checkout").String(), SpanID(commit).String()},
		{"diff", "", SpanID(commit).String()},
		{"step", "", SpanID(commit, "default/checkout").String()},
	}
	for _, tt := range tests {
		t.Run(tt.span, func(t *testing.T) {
			s := byName[tt.span]
			if s == nil {
				t.Fatalf("span %s not recorded", tt.span)
			}
			if s.SpanContext().TraceID() != TraceID(commit) {
				t.Errorf("trace id %s, want the commit's %s", s.SpanContext().TraceID(), TraceID(commit))
			}
			got := s.SpanContext().SpanID().String()
			if tt.wantSpanID != "" && got != tt.wantSpanID {
				t.Errorf("span id %s, want %s", got, tt.wantSpanID)
			}
			if tt.wantSpanID == "" && (got == SpanID(commit).String() || got == SpanID(commit, "default/checkout").String()) {
				t.Errorf("span id %s is a derived one; spans below a derived span get their own", got)
			}
			parent := ""
			if s.Parent().IsValid() {
				parent = s.Parent().SpanID().String()
			}
			if parent != tt.wantParent {
				t.Errorf("parent %q, want %q", parent, tt.wantParent)
			}
		})
	}
	if byName["diff"].SpanContext().SpanID() == byName["load"].SpanContext().SpanID() {
		t.Errorf("two plain spans share span id %s", byName["diff"].SpanContext().SpanID())
	}
}
