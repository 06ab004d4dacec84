package gitwatch

import (
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Remote is the repository a Watcher follows, as other writers of the same
// repository (controller/writeback) need it: the URL go-git is given, a
// display form safe for logs, and the very credentials the Watcher fetches
// with, so a push needs no second set.
type Remote struct {
	cfg *config
}

// NewRemote validates repo and auth as a Watcher would.
func NewRemote(repo string, auth Auth) (*Remote, error) {
	cfg, err := Options{Repo: repo, CacheDir: "-", Auth: auth}.config()
	if err != nil {
		return nil, err
	}
	return &Remote{cfg: cfg}, nil
}

// URL is what go-git is given (absolute for a local path). It may hold
// secrets in its query: never log it, log String.
func (r *Remote) URL() string { return r.cfg.url }

// String is the URL without user info or query.
func (r *Remote) String() string { return r.cfg.display }

// AuthMethod reads the credential files again (so rotation needs no
// restart) and returns go-git's auth, and a function that removes the
// credentials and the URL's secrets from text that leaves the caller.
func (r *Remote) AuthMethod() (transport.AuthMethod, func(string) string, error) {
	auth, sec, err := r.cfg.authMethod()
	if err != nil {
		return nil, nil, err
	}
	return auth, func(text string) string { return sec.redact(r.cfg.redact(text)) }, nil
}
