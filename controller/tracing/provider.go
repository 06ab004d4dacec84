package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options configure New.
type Options struct {
	// Version is the service.version resource attribute.
	Version string
	Logger  *slog.Logger
}

// Provider is sluice's tracer provider: the SDK's with an OTLP exporter
// when the environment asks for one, a no-op one otherwise.
//
// Lifecycle: New, hand TracerProvider to the parts that trace, Shutdown on
// exit (it flushes the spans still queued).
type Provider struct {
	tp  trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// Off is a provider that records nothing, for tests and callers that do
// not trace.
func Off() *Provider { return &Provider{tp: noop.NewTracerProvider()} }

// New reads the standard OTEL_* variables. Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off. The
// protocol comes from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL ("http/protobuf", the default, or "grpc").
// The exporter reads its endpoint, headers, TLS and timeout variables
// itself, the SDK reads OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*, and the
// resource reads OTEL_SERVICE_NAME (default "sluice") and
// OTEL_RESOURCE_ATTRIBUTES.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	on, err := enabled(os.Getenv)
	if err != nil || !on {
		return Off(), err
	}
	exp, err := newExporter(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "sluice"), attribute.String("service.version", opts.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME wins over the default
	)
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	opts.Logger.Info("tracing on", "protocol", protocol(os.Getenv))
	return &Provider{tp: sdk, sdk: sdk}, nil
}

// TracerProvider is what the traced parts take.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Shutdown flushes the queued spans and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

func enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: sluice exports traces with \"otlp\" only (or \"none\")", exp)
	}
}

func protocol(getenv func(string) string) string {
	if p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")); p != "" {
		return p
	}
	if p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")); p != "" {
		return p
	}
	return "http/protobuf"
}

// errProtocol is returned for an OTLP protocol sluice does not speak.
var errProtocol = errors.New("unsupported OTLP protocol")

func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	switch p := protocol(getenv); p {
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp grpc exporter: %w", err)
		}
		return exp, nil
	case "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp http exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: %w (use grpc or http/protobuf)", p, errProtocol)
	}
}

// WithProcessor is a provider that hands every span to sp, with sluice's
// derived ids: for tests (the SDK's tracetest.SpanRecorder) and for a
// program embedding sluice with its own export pipeline.
func WithProcessor(sp sdktrace.SpanProcessor) *Provider {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithIDGenerator(idGenerator{}))
	return &Provider{tp: sdk, sdk: sdk}
}
