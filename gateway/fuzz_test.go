package gateway

import (
	"context"
	"encoding/binary"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// sinkStream is the transport under the stream handling the fuzz target
// drives: it records what the server sends.
type sinkStream struct {
	grpc.ServerStream // only SendMsg and Context are called
	ctx               context.Context
	sotw              [numTypes]*discoveryv3.DiscoveryResponse
	delta             [numTypes]*discoveryv3.DeltaDiscoveryResponse
}

func (f *sinkStream) Context() context.Context { return f.ctx }

func (f *sinkStream) SendMsg(m any) error {
	switch r := m.(type) {
	case *discoveryv3.DiscoveryResponse:
		if t, ok := typeOf(r.GetTypeUrl()); ok {
			f.sotw[t] = r
		}
	case *discoveryv3.DeltaDiscoveryResponse:
		if t, ok := typeOf(r.GetTypeUrl()); ok {
			f.delta[t] = r
		}
	}
	return nil
}

// Fuzz operations: each is one byte, then for requests a 2-byte length and
// an encoded request.
const (
	opSotw       = iota // a DiscoveryRequest on the state-of-the-world stream
	opDelta             // a DeltaDiscoveryRequest on the delta stream
	opPublish           // a weight change (next byte: weight)
	opSecond            // add or remove a second rollout
	opReplySotw         // ACK (even next byte) or NACK the last SotW response of a type
	opReplyDelta        // the same on the delta stream
	numOps
)

// xdsFuzzer holds one server and its two streams for one fuzz input.
type xdsFuzzer struct {
	t       *testing.T
	s       *Server
	streams [2]*stream // SotW, delta; nil once refused
	sinks   [2]*sinkStream
	nacks   []Nack
	second  bool
}

func newXDSFuzzer(t *testing.T) *xdsFuzzer {
	f := &xdsFuzzer{t: t}
	s, err := New(Options{Limits: Limits{NamesPerRequest: 8, NamesPerSubscription: 12, NameLength: 64, SubscribedBytes: 2048, Streams: 4},
		OnNack: func(n Nack) { f.nacks = append(f.nacks, n) }})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	if _, err := s.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	for i := range f.streams {
		st, err := s.addStream(context.Background(), i == 1)
		if err != nil {
			t.Fatal(err)
		}
		f.streams[i], f.sinks[i] = st, &sinkStream{ctx: context.Background()}
	}
	return f
}

// end closes a stream the way the handler does when it returns.
func (f *xdsFuzzer) end(i int) {
	if f.streams[i] != nil {
		f.s.dropStream(f.streams[i])
		f.streams[i] = nil
	}
}

func (f *xdsFuzzer) sotw(req *discoveryv3.DiscoveryRequest) {
	st := f.streams[0]
	if st == nil {
		return
	}
	if f.s.sotwAckInline(st, req) {
		return
	}
	t, ok := typeOf(req.GetTypeUrl())
	if !ok {
		return
	}
	if n, err := f.s.sotwRequest(st, t, req); err != nil {
		f.end(0)
		return
	} else if n != nil {
		f.nacks = append(f.nacks, *n)
	}
	if err := f.s.sotwSend(f.sinks[0], st, t); err != nil {
		f.t.Fatal(err)
	}
}

func (f *xdsFuzzer) delta(req *discoveryv3.DeltaDiscoveryRequest) {
	st := f.streams[1]
	if st == nil {
		return
	}
	t, ok := typeOf(req.GetTypeUrl())
	if !ok {
		return
	}
	if n, err := f.s.deltaRequest(st, t, req); err != nil {
		f.end(1)
		return
	} else if n != nil {
		f.nacks = append(f.nacks, *n)
	}
	if err := f.s.deltaSend(f.sinks[1], st, t); err != nil {
		f.t.Fatal(err)
	}
}

// pushAll is what a publish wakes every stream to do.
func (f *xdsFuzzer) pushAll() {
	for t := range numTypes {
		if f.streams[0] != nil {
			_ = f.s.sotwSend(f.sinks[0], f.streams[0], t)
		}
		if f.streams[1] != nil {
			_ = f.s.deltaSend(f.sinks[1], f.streams[1], t)
		}
	}
}

func (f *xdsFuzzer) run(data []byte) {
	for len(data) > 0 {
		op := data[0] % numOps
		data = data[1:]
		arg := byte(0)
		if len(data) > 0 {
			arg = data[0]
		}
		switch op {
		case opSotw, opDelta:
			if len(data) < 2 {
				return
			}
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			msg := data[:n]
			data = data[n:]
			if op == opSotw {
				req := &discoveryv3.DiscoveryRequest{}
				if proto.Unmarshal(msg, req) == nil {
					f.sotw(req)
				}
			} else {
				req := &discoveryv3.DeltaDiscoveryRequest{}
				if proto.Unmarshal(msg, req) == nil {
					f.delta(req)
				}
			}
		case opPublish:
			data = data[min(1, len(data)):]
			if _, err := f.s.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(int32(arg % 101)) })); err != nil {
				f.t.Fatal(err)
			}
			f.pushAll()
		case opSecond:
			var err error
			if f.second {
				err = f.s.Remove(cart)
			} else {
				_, err = f.s.SetTraffic(cartTraffic())
			}
			if err != nil {
				f.t.Fatal(err)
			}
			f.second = !f.second
			f.pushAll()
		case opReplySotw, opReplyDelta:
			data = data[min(1, len(data)):]
			f.reply(op == opReplyDelta, typeIdx(arg%uint8(numTypes)), arg&0x80 != 0)
		}
		f.checkAcks()
	}
}

// reply ACKs or NACKs the last response of type t, as a client would.
func (f *xdsFuzzer) reply(delta bool, t typeIdx, nack bool) {
	var detail *statuspb.Status
	if nack {
		detail = &statuspb.Status{Code: 3, Message: string(make([]byte, 3000))}
	}
	if delta {
		if r := f.sinks[1].delta[t]; r != nil {
			f.delta(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(), ErrorDetail: detail})
		}
		return
	}
	if r := f.sinks[0].sotw[t]; r != nil {
		f.sotw(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(),
			ResourceNames: f.streams0Names(t), ErrorDetail: detail})
	}
}

func (f *xdsFuzzer) streams0Names(t typeIdx) []string {
	if st := f.streams[0]; st != nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.sotw[t].names
	}
	return nil
}

// checkAcks runs WaitForAck's check once (a cancelled context returns
// after it), so its reading of every stream's state is fuzzed too.
func (f *xdsFuzzer) checkAcks() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, h := range []string{host, "cart.internal"} {
		key := checkout
		if h != host {
			key = cart
		}
		if v, ok := f.s.Version(key); ok {
			_ = f.s.WaitForAck(ctx, h, v)
		}
	}
}

// verify ends both streams and checks that nothing outlived them.
func (f *xdsFuzzer) verify() {
	f.end(0)
	f.end(1)
	if got := f.s.subscribedBytes.Load(); got != 0 {
		f.t.Fatalf("%d subscribed bytes left after every stream closed", got)
	}
	if got := f.s.cachedResponses(); got != 0 {
		f.t.Fatalf("%d cached responses left after every stream closed", got)
	}
	for t := range numTypes {
		if len(f.s.keyRefs[t]) != 0 {
			f.t.Fatalf("subscription keys left: %d", len(f.s.keyRefs[t]))
		}
	}
	for _, n := range f.nacks {
		if len(n.Detail) > maxDetail {
			f.t.Fatalf("NACK detail of %d bytes", len(n.Detail))
		}
	}
}

// FuzzXDSRequests feeds sequences of state-of-the-world and delta requests,
// replies to what the server sent, and publishes between them, through the
// server's request handling. It checks that nothing panics, that limits
// hold, and that streams leave nothing behind.
func FuzzXDSRequests(f *testing.F) {
	enc := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	req := func(op byte, m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return append([]byte{op, byte(len(b) >> 8), byte(len(b))}, b...)
	}
	sotw := func(typ typeIdx, names ...string) []byte {
		return req(opSotw, &discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[typ], ResourceNames: names, Node: nodeProto("fuzz")})
	}
	delta := func(typ typeIdx, sub, unsub []string) []byte {
		return req(opDelta, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[typ], ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub, Node: nodeProto("fuzz")})
	}
	reply := func(op byte, t typeIdx, nack bool) []byte {
		b := byte(t)
		if nack {
			b |= 0x80
		}
		return []byte{op, b}
	}
	f.Add(enc(sotw(cds), reply(opReplySotw, cds, false), sotw(rds, host), reply(opReplySotw, rds, false),
		[]byte{opPublish, 40}, reply(opReplySotw, rds, true), []byte{opSecond}, reply(opReplySotw, cds, true)))
	f.Add(enc(delta(rds, []string{EnvoyName}, nil), reply(opReplyDelta, rds, false), delta(cds, nil, nil),
		[]byte{opPublish, 70}, reply(opReplyDelta, rds, true), []byte{opSecond, opSecond}, delta(rds, nil, []string{EnvoyName})))
	f.Add(enc(sotw(rds, "a", "b", "c", "d", "e", "f", "g", "h", "i"), sotw(eds, string(make([]byte, 65)))))
	f.Add(enc(delta(eds, []string{"1", "2", "3", "4", "5", "6", "7", "8"}, nil), delta(eds, []string{"9", "10", "11", "12", "13"}, nil)))
	f.Add(enc(sotw(lds, host, EnvoyName), sotw(lds, "*"), sotw(lds), reply(opReplySotw, lds, false), []byte{opSecond}, sotw(rds, host, "cart.internal"), reply(opReplySotw, rds, true)))
	f.Add(enc(req(opSotw, &discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[cds], ResponseNonce: "nope", ErrorDetail: &statuspb.Status{Message: "x"}}),
		req(opDelta, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds], InitialResourceVersions: map[string]string{"shop/checkout/stable": "x", "gone": "y"}})))
	f.Fuzz(func(t *testing.T, data []byte) {
		fz := newXDSFuzzer(t)
		fz.run(data)
		fz.verify()
	})
}
