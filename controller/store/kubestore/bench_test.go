package kubestore_test

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// BenchmarkSaveRollout is one save of a canary's record (3.6 KB, the size
// of one in its analysis step: docs/scale.md) to an existing object, as
// every save after a rollout's first. The apiserver runs in its own
// processes, so cpu-µs/op is the store's side alone (this process's user
// and system time): what the daemon spends per save. ns/op is mostly the
// apiserver's answer.
func BenchmarkSaveRollout(b *testing.B) {
	ns := kubetest.Shared(b).Namespace(b)
	s := newStore(b, ns, &testFence{epoch: 1, name: "a"})
	if _, err := s.LoadRollouts(); err != nil {
		b.Fatal(err)
	}
	key := api.Key{Namespace: ns, Name: "checkout"}
	record := bytes.Repeat([]byte(`{"spec":"x"}`), 300)
	if err := s.SaveRollout(key, record); err != nil {
		b.Fatal(err)
	}
	start := processCPU(b)
	for b.Loop() {
		if err := s.SaveRollout(key, record); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is this process's user and system time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
