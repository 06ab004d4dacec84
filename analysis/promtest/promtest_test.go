package promtest

import (
	"strings"
	"testing"
)

func TestBinaryMissingIsAClearError(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		path    string
		want    string
		wantErr string
	}{
		{name: "override wins", env: "/opt/prom/prometheus", path: t.TempDir(), want: "/opt/prom/prometheus"},
		{name: "not installed", path: t.TempDir(), wantErr: "run hack/test-deps.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvBinary, tt.env)
			t.Setenv("PATH", tt.path)
			got, err := Binary()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Binary() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Binary() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
