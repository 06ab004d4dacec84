// Package e2e holds sluice's end-to-end tests: they build the sluice binary
// once and drive it as a separate process, the way a user does, against
// real git (a bare repository, pushes with the git command), real gRPC xDS
// clients and demo backends (gateway/probe), and real Prometheus and
// Alertmanager (Debian packages, see hack/test-deps.sh).
//
// Every scenario runs its own daemon on loopback ports chosen by the
// kernel and reads them back from the daemon's log, so scenarios run in
// parallel without port clashes.
package e2e
