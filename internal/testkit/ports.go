package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowestPort is the lowest port FreeAddr hands out: below it are the
// well-known and many fixed service ports.
const lowestPort = 10000

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// process that must be told its address before it binds it. The port is
// below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
// 32768 and up by default): a port the kernel handed out for a moment
// (net.Listen on port 0, then closed) may go to any outgoing connection of
// the machine before the process binds it, and a replica's start failed in
// CI that way ("bind: address already in use"). Outside Linux, or with an
// ephemeral range that starts too low, it takes the kernel's port.
func FreeAddr() (string, error) {
	if ephemeral := ephemeralLow(); ephemeral > lowestPort+1000 {
		for range 100 {
			port := lowestPort + rand.IntN(ephemeral-lowestPort)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // taken
			}
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreePorts is n distinct ports from FreeAddr, for a process given several.
func FreePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	ports := make([]int, 0, n)
	for len(ports) < n {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(addr)
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("pick a port: %q: %w", addr, err)
		}
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// FreeLoopbackAddr is FreeAddr for a test, which fails if there is none.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return n
}
