package gitwatch

import (
	"strings"
	"testing"
	"time"
)

// TestURLQueryRedacted: a secret in the repository URL's query (some forges
// accept ?private_token=) never reaches the log or Status, even when go-git
// quotes the URL in its errors; the repository path still does, so the
// operator knows which repository failed.
func TestURLQueryRedacted(t *testing.T) {
	const secret = "sekret-query-123"
	srv, _, _ := gitServer(t)
	if err := srv.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.StopHTTP)
	tests := []struct {
		name, repo string
	}{
		{name: "query", repo: srv.HTTPAddress() + "/org/repo.git?private_token=" + secret},
		{name: "query and fragment", repo: srv.HTTPAddress() + "/org/missing.git?private_token=" + secret + "#x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startWatcher(t, testOptions(t, tt.repo))
			eventually(t, 10*time.Second, "a failed fetch", func() bool { return h.w.Status().Failures > 0 })
			s := h.w.Status()
			if want := srv.HTTPAddress() + "/org/"; !strings.HasPrefix(s.Repo, want) || !strings.Contains(s.LastError, want) {
				t.Errorf("status %+v does not name the repository %s", s, want)
			}
			assertNoLeak(t, h, secret)
		})
	}
}
