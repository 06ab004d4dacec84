package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/controller/httpapi"
)

// TestAPIAccess: the tokens are read from their files, a read token
// without a write token is refused, and the name --http-addr listens on
// is served.
func TestAPIAccess(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write, read := file("write", "w-tok\n"), file("read", " r-tok ")
	tests := []struct {
		name      string
		opts      Options
		wantErr   string
		wantHosts []string
		wantRead  string
	}{
		{name: "loopback default", opts: Options{HTTPAddr: "127.0.0.1:8080"}},
		{name: "a name to listen on", opts: Options{HTTPAddr: "sluice.internal:8080", APIAllowedHosts: []string{"a.example"}},
			wantHosts: []string{"a.example", "sluice.internal"}},
		{name: "all interfaces", opts: Options{HTTPAddr: ":8080", APIAllowedHosts: []string{"sluice.ns.svc"}}, wantHosts: []string{"sluice.ns.svc"}},
		{name: "both tokens", opts: Options{HTTPAddr: ":8080", APITokenFile: write, APIReadTokenFile: read}, wantRead: "r-tok"},
		{name: "read token alone", opts: Options{HTTPAddr: ":8080", APIReadTokenFile: read}, wantErr: "--api-read-token-file needs --api-token-file"},
		{name: "empty read token", opts: Options{HTTPAddr: ":8080", APITokenFile: write, APIReadTokenFile: file("empty", "\n")}, wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.APIAccess(httpapi.Options{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.AllowedHosts, tt.wantHosts) || got.ReadToken != tt.wantRead {
				t.Errorf("hosts %q read %q, want %q %q", got.AllowedHosts, got.ReadToken, tt.wantHosts, tt.wantRead)
			}
			if tt.opts.APITokenFile != "" && got.Token != "w-tok" {
				t.Errorf("write token %q", got.Token)
			}
		})
	}
}
