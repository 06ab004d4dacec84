package gateway

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// BenchmarkUnknownNameAttack measures the heap the server keeps for
// streams that subscribe to made-up route names: 300 streams each first
// subscribe to one short name (the baseline: connections and streams),
// then re-subscribe to names of the given size; the reported held-MB is
// the live heap after GC with the attack in place minus the baseline, and
// released-MB what is still held once every stream closed. Streams the
// server refuses count as part of the attack (their memory is gone).
//
//	go test -run '^$' -bench UnknownNameAttack -benchtime 1x ./gateway/
func BenchmarkUnknownNameAttack(b *testing.B) {
	cases := []struct {
		streams, perStream, size int
	}{
		{300, 1, 1 << 20},   // the attack of issue 19: 1 MB names
		{300, 200, 1 << 10}, // 1 KiB names, 60 MB in all: what the default limits let through
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%dx%dx%dB", tc.streams, tc.perStream, tc.size), func(b *testing.B) {
			for range b.N {
				held, released := unknownNameAttack(b, tc.streams, tc.perStream, tc.size)
				b.ReportMetric(held/1e6, "held-MB")
				b.ReportMetric(released/1e6, "released-MB")
			}
		})
	}
}

func unknownNameAttack(b *testing.B, streams, perStream, size int) (held, released float64) {
	srv := startServer(b, "127.0.0.1:0", nil)
	defer srv.stop()
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribe := func(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, names []string) {
		if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNames: names}); err != nil {
			return // refused earlier
		}
		_, _ = s.Recv() // the answer, or the refusal
	}
	var open []discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	for i := range streams {
		s, err := adsClient(b, srv.addr).StreamAggregatedResources(ctx)
		if err != nil {
			b.Fatal(err)
		}
		subscribe(s, []string{fmt.Sprintf("short-%d", i)})
		open = append(open, s)
	}
	base := liveHeap()
	for i, s := range open {
		names := make([]string, perStream)
		for j := range names {
			names[j] = fmt.Sprintf("%d-%d-", i, j) + strings.Repeat("x", size-20)
		}
		subscribe(s, names)
	}
	held = liveHeap() - base
	cancel()
	for srv.Clients() > 0 {
		runtime.Gosched()
	}
	released = liveHeap() - base
	return held, released
}

// liveHeap is the heap in use after a full collection.
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}
