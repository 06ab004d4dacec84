package gateway

import (
	"context"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// bulkyNode is a node whose metadata Struct is about size bytes on the
// wire: many short fields, as an attacker would send to make decoding
// costly (finding N9: 3.75 MB a node).
func bulkyNode(t testing.TB, id string, size int) *corev3.Node {
	t.Helper()
	fields := map[string]any{}
	for i := 0; i < size/64; i++ {
		fields[fmt.Sprintf("k%07d", i)] = strings.Repeat("v", 48)
	}
	md, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: id, Metadata: md}
}

// TestNodeBytesLimit is finding N9: a node with megabytes of metadata was
// decoded and accepted. Now a node over Limits.NodeBytes ends its stream
// before it is decoded (SotW and delta), an Istio-sized node is served,
// and a request over Limits.RequestBytes is refused by gRPC unread.
func TestNodeBytesLimit(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits.RequestBytes = 8 << 20 })
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	huge := bulkyNode(t, "evil", 3_750_000)
	istio := bulkyNode(t, "sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local", 8<<10)
	tests := []struct {
		name     string
		node     *corev3.Node
		delta    bool
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "sotw 3.75 MB node", node: huge, wantCode: codes.Internal, wantMsg: "more than the 65536-byte limit (--xds-max-node-bytes)"},
		{name: "delta 3.75 MB node", node: huge, delta: true, wantCode: codes.Internal, wantMsg: "more than the 65536-byte limit (--xds-max-node-bytes)"},
		{name: "sotw Istio-sized node", node: istio, wantCode: codes.OK},
		{name: "delta Istio-sized node", node: istio, delta: true, wantCode: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := refusedCount(t, srv.Server, refusedNodeBytes)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var err error
			if tt.delta {
				s, serr := adsClient(t, srv.addr).DeltaAggregatedResources(ctx)
				if serr != nil {
					t.Fatal(serr)
				}
				if serr = s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: tt.node, TypeUrl: typeURLs[lds]}); serr != nil {
					t.Fatal(serr)
				}
				_, err = s.Recv()
			} else {
				s, serr := adsClient(t, srv.addr).StreamAggregatedResources(ctx)
				if serr != nil {
					t.Fatal(serr)
				}
				if serr = s.Send(&discoveryv3.DiscoveryRequest{Node: tt.node, TypeUrl: typeURLs[lds]}); serr != nil {
					t.Fatal(serr)
				}
				_, err = s.Recv()
			}
			if got := status.Code(err); got != tt.wantCode || !strings.Contains(fmt.Sprint(err), tt.wantMsg) {
				t.Fatalf("stream ended with %v (%v), want %v with %q", got, err, tt.wantCode, tt.wantMsg)
			}
			wantRefused := before
			if tt.wantCode != codes.OK {
				wantRefused++
			}
			if got := refusedCount(t, srv.Server, refusedNodeBytes); got != wantRefused {
				t.Errorf("sluice_xds_refused_total{reason=node_bytes} = %v, want %v", got, wantRefused)
			}
		})
	}
	t.Run("request over RequestBytes", func(t *testing.T) {
		small := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits.RequestBytes = 1 << 20 })
		s, err := adsClient(t, small.addr).StreamAggregatedResources(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[cds], ResourceNames: names(2000, 1000)}); err != nil {
			t.Fatal(err)
		}
		if got := recvCode(t, s.Recv); got != codes.ResourceExhausted {
			t.Fatalf("2 MB request ended with %v, want ResourceExhausted", got)
		}
	})
}

// rawFrame is a request already in wire form, sent by rawCodec as is, so
// that the benchmark's clients do not allocate a copy per stream and only
// the server's memory is measured. The bytes are a real
// DiscoveryRequest; the server decodes them with gRPC's proto codec.
type rawFrame struct{ b []byte }

type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*rawFrame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// BenchmarkNodeMetadataAttack measures finding N9: 100 streams at once,
// each opening with a 3.75 MB node. peak-MB is the most heap the process
// held while the server read them (sampled every millisecond, minus the
// heap before), alloc-MB all it allocated. "unbounded" turns the node
// check off (NodeBytes 1 GiB), which is the server before the fix.
//
//	go test -run '^$' -bench NodeMetadataAttack -benchtime 1x ./gateway/
func BenchmarkNodeMetadataAttack(b *testing.B) {
	for _, tc := range []struct {
		name      string
		nodeBytes int
	}{{"unbounded", 1 << 30}, {"default", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				peak, alloc := nodeMetadataAttack(b, 100, 3_750_000, tc.nodeBytes)
				b.ReportMetric(peak/1e6, "peak-MB")
				b.ReportMetric(alloc/1e6, "alloc-MB")
			}
		})
	}
}

func nodeMetadataAttack(b *testing.B, streams, size, nodeBytes int) (peak, alloc float64) {
	srv := startServer(b, "127.0.0.1:0", func(o *Options) { o.Limits.NodeBytes = nodeBytes })
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		b.Fatal(err)
	}
	wire, err := proto.Marshal(&discoveryv3.DiscoveryRequest{Node: bulkyNode(b, "evil", size), TypeUrl: typeURLs[lds]})
	if err != nil {
		b.Fatal(err)
	}
	client := adsClient(b, srv.addr)
	codec := grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2(protoenc.Name)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opened []discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	for range streams {
		s, err := client.StreamAggregatedResources(ctx, codec)
		if err != nil {
			b.Fatal(err)
		}
		opened = append(opened, s)
	}
	base, allocBase := heapNow()
	var top atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h, _ := heapNow(); int64(h) > top.Load() {
				top.Store(int64(h))
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for _, s := range opened {
		wg.Go(func() {
			if err := s.SendMsg(&rawFrame{b: wire}); err != nil {
				return
			}
			_, _ = s.Recv() // the answer, or the refusal
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	_, allocEnd := heapNow()
	runtime.KeepAlive(wire)
	return float64(top.Load()) - base, allocEnd - allocBase
}

// heapNow reads the live heap objects and the bytes allocated so far,
// without stopping the world.
func heapNow() (live, allocated float64) {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	return float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64())
}
