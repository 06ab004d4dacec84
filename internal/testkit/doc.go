// Package testkit holds what the tests of several sluice packages share:
//
//   - Golden compares output with a golden file in testdata/ and rewrites
//     it when the test binary runs with -update (the flag is registered
//     here, once, for every test binary that imports this package);
//   - SyncBuffer collects output written from several goroutines (a
//     child process's stdout and stderr, a logger) for the test to read;
//   - StartProcess runs a server binary on a free loopback port until the
//     test ends, waiting until it answers its readiness URL; promtest and
//     amtest start Prometheus and Alertmanager with it;
//   - StallingListener is a peer that accepts and never answers, for
//     timeout tests;
//   - CA issues server and client certificates (PEM files) for tests of
//     TLS and mutual TLS with real handshakes.
//
// It is imported only by tests and test-helper packages, never by the
// daemon.
package testkit
