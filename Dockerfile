# The sluice image the Helm chart (charts/sluice) runs by default:
#   docker build -t ghcr.io/sluice-dev/sluice:0.1.0 --build-arg VERSION=0.1.0 .
# A static binary (CGO_ENABLED=0: go-git, gRPC and client-go need no libc) on
# distroless "static", which has CA certificates and tzdata and no shell; it
# runs as the nonroot user 65532, as the chart's securityContext expects.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Dependencies first, so that a source change reuses their layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/sluice ./cmd/sluice

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
USER 65532:65532
# 18000: xDS (gRPC); 8080: HTTP API, /healthz, /readyz, /metrics.
EXPOSE 18000 8080
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["run", "--help"]
