package gitwatch

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// secrets are the credential values read for one fetch. redact removes them
// from any text that leaves the package (logs, Status), in case a transport
// ever echoes one back.
type secrets []string

func (s secrets) redact(text string) string {
	for _, v := range s {
		if len(v) >= 4 {
			text = strings.ReplaceAll(text, v, "[redacted]")
		}
	}
	return text
}

// authMethod builds the go-git auth for one fetch from the credential files.
// Errors name the file, never its content.
func (c *config) authMethod() (transport.AuthMethod, secrets, error) {
	a := c.Auth
	switch c.endpoint.Protocol {
	case "http", "https":
		if a.PasswordFile == "" {
			if a.Username != "" {
				return &githttp.BasicAuth{Username: a.Username}, nil, nil
			}
			return nil, nil, nil
		}
		pw, err := readSecret(a.PasswordFile, "password file")
		if err != nil {
			return nil, nil, err
		}
		user := a.Username
		if user == "" {
			user = "git" // token auth: any non-empty user name works on the usual forges
		}
		return &githttp.BasicAuth{Username: user, Password: pw}, secrets{pw}, nil
	case "ssh":
		return c.sshAuth()
	default:
		return nil, nil, nil
	}
}

func (c *config) sshAuth() (transport.AuthMethod, secrets, error) {
	a := c.Auth
	user := a.Username
	if user == "" {
		user = c.endpoint.User
	}
	if user == "" {
		user = "git"
	}
	if a.SSHKeyFile == "" {
		return nil, nil, errors.New("ssh repo needs an ssh key file")
	}
	var pass string
	if a.SSHPassphraseFile != "" {
		p, err := readSecret(a.SSHPassphraseFile, "ssh passphrase file")
		if err != nil {
			return nil, nil, err
		}
		pass = p
	}
	pem, err := os.ReadFile(a.SSHKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read ssh key file: %w", pathOnly(err))
	}
	keys, err := gitssh.NewPublicKeys(user, pem, pass)
	if err != nil {
		// Never wrap the parser's error: keep key material out of errors.
		return nil, nil, fmt.Errorf("ssh key file %s: cannot parse the key (or wrong passphrase)", a.SSHKeyFile)
	}
	switch {
	case a.InsecureIgnoreHostKey:
		keys.HostKeyCallback = ssh.InsecureIgnoreHostKey()
	default:
		var files []string
		if a.KnownHostsFile != "" {
			files = []string{a.KnownHostsFile}
		}
		db, err := gitssh.NewKnownHostsDb(files...)
		if err != nil {
			return nil, nil, fmt.Errorf("known hosts: %w", err)
		}
		keys.HostKeyCallback = db.HostKeyCallback()
		keys.HostKeyAlgorithms = db.HostKeyAlgorithms(c.hostPort())
	}
	return keys, secrets{pass}, nil
}

func (c *config) hostPort() string {
	port := c.endpoint.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(strings.Trim(c.endpoint.Host, "[]"), strconv.Itoa(port))
}

// readSecret reads a credential file, trimming surrounding whitespace.
func readSecret(file, what string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, pathOnly(err))
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "", fmt.Errorf("%s %s is empty", what, file)
	}
	return string(b), nil
}

// pathOnly keeps an *os.PathError (file name and reason) and drops anything
// else a read error might carry.
func pathOnly(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe
	}
	return errors.New("unreadable")
}
