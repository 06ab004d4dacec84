package gateway

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
)

// BenchmarkSetTraffic publishes one weight change while the server holds
// 1,000 or 10,000 rollouts: translation, validation, and the new
// generation. No client is connected, so no response is built or sent;
// fan-out to streams is what gateway/bench measures. The cost of one
// change should not grow with the number of rollouts.
func BenchmarkSetTraffic(b *testing.B) {
	for _, layout := range []EnvoyRouteLayout{EnvoyRoutesCombined, EnvoyRoutesScoped} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("layout=%s/rollouts=%d", layout, n), func(b *testing.B) {
				s, err := New(Options{EnvoyRoutes: layout})
				if err != nil {
					b.Fatal(err)
				}
				loadRollouts(b, s, n)
				b.ResetTimer()
				cpu0 := processCPU(b)
				for i := range b.N {
					if _, err := s.SetTraffic(scaleTraffic(i%n, int32(11+i%80))); err != nil {
						b.Fatal(err)
					}
				}
				// CPU time, unlike ns/op, does not count the time this
				// process waits for a core on a shared machine.
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestEnvoyRouteBytes checks that the combined route assembled from encoded
// virtual hosts is byte for byte what a deterministic Marshal produces.
func TestEnvoyRouteBytes(t *testing.T) {
	var vhosts []*routev3.VirtualHost
	var encoded [][]byte
	for _, c := range []int32{0, 10, 100} {
		res, err := Translate(traffic(func(tr *api.Traffic) {
			tr.Rollout.Name = fmt.Sprintf("r%d", c)
			tr.Host = fmt.Sprintf("r%d.internal", c)
			tr.Weights = api.CanaryWeights(c)
			tr.SessionAffinity = &api.SessionAffinity{CookieName: "s", MaxAge: 60}
		}))
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res.VirtualHost)
		if err != nil {
			t.Fatal(err)
		}
		vhosts, encoded = append(vhosts, res.VirtualHost), append(encoded, b)
	}
	for _, n := range []int{0, 1, 3} {
		_, rc := EnvoyResources(10000, vhosts[:n])
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(rc)
		if err != nil {
			t.Fatal(err)
		}
		if got := envoyRouteBytes(encoded[:n]); !bytes.Equal(got, want) {
			t.Errorf("%d virtual hosts: assembled bytes differ from Marshal", n)
		}
	}
}

// processCPU is the user and system CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
