// Package gittest serves test repositories over SSH with fluxcd's
// gittestserver, for the tests of gitwatch, controller/writeback and e2e,
// which all need a git server that accepts exactly one client key.
//
// It is imported only by tests, never by the daemon.
package gittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/gitkit"
	"github.com/fluxcd/pkg/gittestserver"
	"golang.org/x/crypto/ssh"
)

// SSHKey makes an ed25519 key pair: the private key as PEM (encrypted
// when pass is set) and the public key as an authorized_keys line.
func SSHKey(t testing.TB, pass string) (pemBytes []byte, authorized string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if pass != "" {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(pass))
	} else {
		block, err = ssh.MarshalPrivateKey(priv, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
}

// ServeSSH starts srv's SSH server, accepting only the public key
// authorized, until the test ends. srv must have a KeyDir and public key
// checking switched on (Auth("", "")); ServeNewKey does both.
func ServeSSH(t testing.TB, srv *gittestserver.GitServer, authorized string) {
	t.Helper()
	srv.PublicKeyLookupFunc(func(content string) (*gitkit.PublicKey, error) {
		if content == authorized {
			return &gitkit.PublicKey{Id: "sluice"}, nil
		}
		return nil, errors.New("unknown key")
	})
	if err := srv.ListenSSH(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.StartSSH() }()
	t.Cleanup(func() { _ = srv.StopSSH() })
}

// ServeNewKey serves srv over SSH for one new key and returns the key's
// private half as PEM.
func ServeNewKey(t testing.TB, srv *gittestserver.GitServer) []byte {
	t.Helper()
	key, authorized := SSHKey(t, "")
	srv.KeyDir(t.TempDir())
	srv.Auth("", "") // switches on public key checking
	ServeSSH(t, srv, authorized)
	return key
}
