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

// TestFreePortsDistinct checks that FreePorts hands out as many distinct
// ports as asked, each bindable.
func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("port %d cannot be bound: %v", port, err)
			continue
		}
		l.Close()
	}
	if len(ports) != 50 {
		t.Errorf("%d ports, want 50", len(ports))
	}
}
