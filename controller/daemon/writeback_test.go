package daemon

import "testing"

func TestParseWriteback(t *testing.T) {
	tests := []struct {
		in      string
		want    writebackModes
		wantErr bool
	}{
		{in: "", want: writebackModes{}},
		{in: "none", want: writebackModes{}},
		{in: "status", want: writebackModes{status: true}},
		{in: "revert", want: writebackModes{revert: true}},
		{in: "status,revert", want: writebackModes{status: true, revert: true}},
		{in: "revert, status", want: writebackModes{status: true, revert: true}},
		{in: "push", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseWriteback(tt.in)
			if (err != nil) != tt.wantErr || err == nil && got != tt.want {
				t.Errorf("parseWriteback(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestForgeRepoPath(t *testing.T) {
	tests := map[string]string{
		"https://github.com/org/repo.git":           "org/repo",
		"https://gitlab.com/group/sub/repo":         "group/sub/repo",
		"git@github.com:org/repo.git":               "org/repo",
		"ssh://git@gitea.example:2222/org/repo.git": "org/repo",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if got := forgeRepoPath(in); got != want {
				t.Errorf("forgeRepoPath(%q) = %q, want %q", in, got, want)
			}
		})
	}
}
