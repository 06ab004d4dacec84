package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// tokenChecker compares bearer tokens in constant time. Both sides are
// hashed first so that the comparison does not reveal the token's length.
type tokenChecker struct {
	sum [sha256.Size]byte
	on  bool
}

func newTokenChecker(token string) *tokenChecker {
	if token == "" {
		return &tokenChecker{}
	}
	return &tokenChecker{sum: sha256.Sum256([]byte(token)), on: true}
}

func (t *tokenChecker) allowed(r *http.Request) bool {
	if !t.on {
		return true
	}
	tok, ok := bearer(r)
	return ok && t.matches(tok)
}

// matches compares tok with the token; false when there is none.
func (t *tokenChecker) matches(tok string) bool {
	if !t.on {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], t.sum[:]) == 1
}

// bearer is the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// ReadToken reads a token file (--api-token-file, --token-file), trimming
// surrounding whitespace; an empty file is an error rather than a silently
// disabled check.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("read token: %s is empty", path)
	}
	return tok, nil
}
