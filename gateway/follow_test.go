package gateway

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/gateway/subscriber"
)

// follower is a raw ADS subscriber shaped like Envoy (of the sluice-http
// listener) or like a gRPC client of one host; see package subscriber.
type follower struct {
	*subscriber.Subscriber
	name string
}

// startFollower subscribes until ctx ends.
func startFollower(ctx context.Context, t testing.TB, addr, name string, delta, envoy bool, host string) *follower {
	t.Helper()
	s, err := subscriber.Start(ctx, adsConn(t, addr), subscriber.Options{Node: name, Delta: delta, Envoy: envoy, Host: host})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &follower{Subscriber: s, name: name}
}
