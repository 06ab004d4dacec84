package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlaintextXDSWarning checks that New warns when xDS listens without
// TLS on an address other hosts can reach, and only then.
func TestPlaintextXDSWarning(t *testing.T) {
	tests := []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:0", false},
		{"[::1]:0", false},
		{":0", true},
		{"0.0.0.0:0", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			var logs bytes.Buffer
			o := Options{Repo: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state"), XDSAddr: tt.addr, HTTPAddr: "127.0.0.1:0",
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			d, err := New(o)
			if err != nil {
				t.Skipf("cannot listen on %s here: %v", tt.addr, err)
			}
			d.close()
			if got := strings.Contains(logs.String(), "xDS is served without TLS"); got != tt.warn {
				t.Fatalf("warned %v, want %v; logs:\n%s", got, tt.warn, logs.String())
			}
		})
	}
}
