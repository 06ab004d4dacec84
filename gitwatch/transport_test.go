package gitwatch

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/sluice-dev/sluice/internal/gittest"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const (
	httpUser     = "sluice"
	httpPassword = "correct-horse-battery"
	keyPass      = "key-passphrase-42"
)

// gitServer starts a gittestserver holding org/repo.git with one pushed
// commit and returns it with the commit SHA.
func gitServer(t *testing.T) (*gittestserver.GitServer, *upstream, string) {
	t.Helper()
	srv, err := gittestserver.NewTempGitServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srv.Root()) })
	u := newUpstreamAt(t, filepath.Join(srv.Root(), "org", "repo.git"))
	c0 := u.commit("c0", map[string]string{"a.yaml": rolloutYAML("a", "shop/a:v1")})
	u.push()
	return srv, u, c0
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// assertNoLeak fails if a secret shows in the status or logs.
func assertNoLeak(t *testing.T, h *harness, secrets ...string) {
	t.Helper()
	s := fmt.Sprintf("%+v", h.w.Status())
	logs := h.logs.String()
	for _, sec := range secrets {
		if strings.Contains(s, sec) || strings.Contains(logs, sec) {
			t.Errorf("secret %q leaked:\nstatus %s\nlogs %s", sec, s, logs)
		}
	}
}

func TestHTTPBasicAuth(t *testing.T) {
	srv, _, c0 := gitServer(t)
	srv.Auth(httpUser, httpPassword)
	if err := srv.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.StopHTTP)
	repoURL := srv.HTTPAddress() + "/org/repo.git"

	tests := []struct {
		name     string
		user     string
		password string // "" = no password file
		wantErr  string
	}{
		{name: "right password", user: httpUser, password: httpPassword},
		{name: "wrong password", user: httpUser, password: "wrong-password-123", wantErr: "authentication"},
		{name: "wrong user", user: "mallory", password: httpPassword, wantErr: "authentication"},
		{name: "no credentials", wantErr: "authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t, repoURL)
			opts.Auth.Username = tt.user
			if tt.password != "" {
				opts.Auth.PasswordFile = writeFile(t, "password", tt.password+"\n")
			}
			h := startWatcher(t, opts)
			if tt.wantErr == "" {
				if r := h.next(10 * time.Second); r.Commit != c0 {
					t.Fatalf("revision %s, want %s", r.Commit, c0)
				}
				return
			}
			eventually(t, 10*time.Second, "a failed fetch", func() bool { return h.w.Status().Failures > 0 })
			if s := h.w.Status(); !strings.Contains(s.LastError, tt.wantErr) {
				t.Errorf("last error %q, want %q", s.LastError, tt.wantErr)
			}
			assertNoLeak(t, h, httpPassword, "wrong-password-123")
			if tt.password == "" {
				return
			}
			// Credentials are re-read on every fetch: fixing the file is
			// enough, no restart.
			if err := os.WriteFile(opts.Auth.PasswordFile, []byte(httpPassword), 0o600); err != nil {
				t.Fatal(err)
			}
			h.w.Trigger()
			if tt.user == httpUser {
				if r := h.next(10 * time.Second); r.Commit != c0 {
					t.Fatalf("after fixing the password: revision %s, want %s", r.Commit, c0)
				}
				assertNoLeak(t, h, httpPassword)
			}
		})
	}
}

func TestSSH(t *testing.T) {
	srv, _, c0 := gitServer(t)
	keyDir := t.TempDir()
	srv.KeyDir(keyDir)
	srv.Auth("", "") // switches on public key checking for SSH
	goodKey, goodPub := gittest.SSHKey(t, keyPass)
	otherKey, _ := gittest.SSHKey(t, "")
	gittest.ServeSSH(t, srv, goodPub)

	// known_hosts from the server's own host key, and one with a stranger.
	addr := strings.TrimPrefix(srv.SSHAddress(), "ssh://git@")
	hostPub, err := os.ReadFile(filepath.Join(keyDir, "gitkit.rsa.pub"))
	if err != nil {
		t.Fatal(err)
	}
	serverPub, _, _, _, err := ssh.ParseAuthorizedKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	// An RSA stranger, so the client offers the algorithm the server has
	// and the check fails on the key itself.
	strangerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ssh.NewPublicKey(&strangerKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	knownGood := writeFile(t, "known_hosts", knownhosts.Line([]string{addr}, serverPub)+"\n")
	knownBad := writeFile(t, "known_hosts", knownhosts.Line([]string{addr}, stranger)+"\n")
	goodKeyFile := writeFile(t, "id_good", string(goodKey))
	otherKeyFile := writeFile(t, "id_other", string(otherKey))
	passFile := writeFile(t, "pass", keyPass+"\n")
	wrongPassFile := writeFile(t, "wrongpass", "not-the-passphrase")

	tests := []struct {
		name    string
		repo    string
		auth    Auth
		wantErr string
	}{
		{name: "ssh URL, encrypted key, known_hosts", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: goodKeyFile, SSHPassphraseFile: passFile, KnownHostsFile: knownGood}},
		{name: "host key check explicitly off", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: goodKeyFile, SSHPassphraseFile: passFile, InsecureIgnoreHostKey: true}},
		{name: "unknown host key", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: goodKeyFile, SSHPassphraseFile: passFile, KnownHostsFile: knownBad}, wantErr: "key mismatch"},
		{name: "key the server does not accept", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: otherKeyFile, KnownHostsFile: knownGood}, wantErr: "unable to authenticate"},
		{name: "wrong passphrase", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: goodKeyFile, SSHPassphraseFile: wrongPassFile, KnownHostsFile: knownGood}, wantErr: "cannot parse the key"},
		{name: "missing passphrase", repo: srv.SSHAddress() + "/org/repo.git",
			auth: Auth{SSHKeyFile: goodKeyFile, KnownHostsFile: knownGood}, wantErr: "cannot parse the key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t, tt.repo)
			opts.Auth = tt.auth
			h := startWatcher(t, opts)
			if tt.wantErr == "" {
				if r := h.next(10 * time.Second); r.Commit != c0 {
					t.Fatalf("revision %s, want %s", r.Commit, c0)
				}
				return
			}
			eventually(t, 10*time.Second, "a failed fetch", func() bool { return h.w.Status().Failures > 0 })
			if s := h.w.Status(); !strings.Contains(s.LastError, tt.wantErr) {
				t.Errorf("last error %q, want %q", s.LastError, tt.wantErr)
			}
			assertNoLeak(t, h, keyPass, "not-the-passphrase", string(goodKey[40:80]))
		})
	}
}

// TestHTTPToken: a token alone (no user name) is sent as basic auth with
// the user "git", which is what the usual forges accept for tokens.
func TestHTTPToken(t *testing.T) {
	const token = "ghp_exampletoken0123456789"
	srv, _, c0 := gitServer(t)
	srv.Auth("git", token)
	if err := srv.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.StopHTTP)
	opts := testOptions(t, srv.HTTPAddress()+"/org/repo.git")
	opts.Auth.PasswordFile = writeFile(t, "token", token+"\n")
	h := startWatcher(t, opts)
	if r := h.next(10 * time.Second); r.Commit != c0 {
		t.Fatalf("revision %s, want %s", r.Commit, c0)
	}
	assertNoLeak(t, h, token)
}
