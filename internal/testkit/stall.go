package testkit

import (
	"net"
	"sync"
	"testing"
)

// StallingListener listens on a free loopback port, accepts every
// connection and never answers on it: the peer that a timeout must cut
// off. It returns the address and a count of the connections accepted so
// far; everything is closed when the test ends.
func StallingListener(t testing.TB) (addr string, accepted func() int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}
