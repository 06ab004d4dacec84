package testkit

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeLoopbackAddrBelowEphemeralRange checks that the addresses handed
// out can be bound and, on a kernel whose ephemeral range starts high
// enough, lie below it (where no outgoing connection is given a port).
func TestFreeLoopbackAddrBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr := FreeLoopbackAddr(t)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeLoopbackAddr gave %s, which cannot be bound: %v", addr, err)
		}
		l.Close()
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if low > lowestPort+1000 && (port < lowestPort || port >= low) {
			t.Errorf("port %d outside [%d, %d): the kernel's ephemeral range starts at %d", port, lowestPort, low, low)
		}
	}
}
