package writeback

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/gittestserver"

	"github.com/sluice-dev/sluice/gitwatch"
	"github.com/sluice-dev/sluice/internal/gittest"
)

// TestRevertTransports pushes the revert with go-git over real HTTP (basic
// and token auth) and SSH servers (fluxcd/pkg/gittestserver), with the
// credentials the watcher fetches with; wrong credentials fail and never
// show in the error.
func TestRevertTransports(t *testing.T) {
	const (
		user     = "sluice"
		password = "correct-horse-battery"
		token    = "ghp_exampletoken0123456789"
	)
	tests := []struct {
		name    string
		serve   func(t *testing.T, srv *gittestserver.GitServer) (url string, auth gitwatch.Auth)
		wantErr string
	}{
		{name: "http basic", serve: func(t *testing.T, srv *gittestserver.GitServer) (string, gitwatch.Auth) {
			return startHTTP(t, srv, user, password), gitwatch.Auth{Username: user, PasswordFile: secretFile(t, password)}
		}},
		{name: "http token", serve: func(t *testing.T, srv *gittestserver.GitServer) (string, gitwatch.Auth) {
			return startHTTP(t, srv, "git", token), gitwatch.Auth{PasswordFile: secretFile(t, token)}
		}},
		{name: "http wrong password", wantErr: "authentication", serve: func(t *testing.T, srv *gittestserver.GitServer) (string, gitwatch.Auth) {
			return startHTTP(t, srv, user, password), gitwatch.Auth{Username: user, PasswordFile: secretFile(t, "wrong-password-123")}
		}},
		{name: "ssh key", serve: func(t *testing.T, srv *gittestserver.GitServer) (string, gitwatch.Auth) {
			key := gittest.ServeNewKey(t, srv)
			return srv.SSHAddress() + "/org/repo.git", gitwatch.Auth{SSHKeyFile: secretFile(t, string(key)), InsecureIgnoreHostKey: true}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := gittestserver.NewTempGitServer()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(srv.Root()) })
			u := newUpstream(t, filepath.Join(srv.Root(), "org", "repo.git"))
			canary := startCanary(u)
			url, auth := tt.serve(t, srv)
			rem, err := gitwatch.NewRemote(url, auth)
			if err != nil {
				t.Fatal(err)
			}
			res, err := newTestReverter(t, rem, "").Revert(context.Background(), request(canary))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				for _, secret := range []string{password, "wrong-password-123"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil || res.Outcome != Reverted {
				t.Fatalf("revert: %+v, %v", res, err)
			}
			if u.head() != res.Commit {
				t.Fatalf("branch at %s, want the revert %s", u.head(), res.Commit)
			}
			u.assertImageLineDiff(res.Commit, "deploy/checkout.yaml")
		})
	}
}

func startHTTP(t *testing.T, srv *gittestserver.GitServer, user, password string) string {
	t.Helper()
	srv.Auth(user, password)
	if err := srv.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.StopHTTP)
	return srv.HTTPAddress() + "/org/repo.git"
}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
