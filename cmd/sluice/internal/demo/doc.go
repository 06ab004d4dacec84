// Package demo is `sluice demo`: one command that shows a real canary on one
// machine. It writes a throw-away git repository with a realistic strategy,
// runs the daemon in-process, starts two demo backends and a load generator
// of real gRPC xDS clients (gateway/probe), pushes v2 with git, and shows
// the rollout live: phase and step, declared weights next to the split the
// clients actually observe, analysis values and verdicts, events and the
// alerts a local webhook sink receives. It ends with a summary.
//
// The pieces are separate so they can be tested without the daemon:
// Strategy writes the files, Repo owns the git repository, Sink receives
// alerts, Live renders frames, and Recorder turns frames into the Summary.
package demo
