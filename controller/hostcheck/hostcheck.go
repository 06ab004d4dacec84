// Package hostcheck refuses HTTP requests whose Host header names a host
// the server does not answer to. It is the defence against DNS
// rebinding: a page on evil.example whose name is made to resolve to
// 127.0.0.1 reaches a loopback server from the victim's browser, as the
// same origin, but its requests still carry "Host: evil.example".
//
// A List allows localhost, every IP literal and the names it is given.
// IP literals are safe to allow: a browser sends an IP as Host only when
// the page's own origin is that IP, which no attacker's DNS can arrange.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// List is a set of host names a server answers to. The zero value allows
// localhost and IP literals only. It is safe for concurrent use once
// built.
type List struct {
	exact    map[string]bool
	suffixes []string // from "*.example.com": ".example.com"
}

// New builds a List from names such as "sluice.example.com" or
// "*.example.com" (any name under example.com, not example.com itself);
// flag names the setting for errors.
func New(flag string, names []string) (*List, error) {
	l := &List{exact: map[string]bool{}}
	for _, n := range names {
		name := normalize(n)
		wild := strings.HasPrefix(name, "*.")
		if wild {
			name = name[2:]
		}
		if !validName(name) {
			return nil, fmt.Errorf("%s %q: want a host name such as sluice.example.com or *.example.com, without scheme, port or path", flag, n)
		}
		if wild {
			l.suffixes = append(l.suffixes, "."+name)
			continue
		}
		l.exact[name] = true
	}
	return l, nil
}

// Allowed says whether the Host header value hostport (as in
// http.Request.Host: a name or IP, maybe with a port) is served. An empty
// Host (HTTP/1.0 clients) is allowed: browsers always send one.
func (l *List) Allowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalize(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return true
	}
	if l == nil {
		return false
	}
	if l.exact[host] {
		return true
	}
	for _, s := range l.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// Handler answers 421 Misdirected Request, with a plain-text body saying
// what to do, to every request whose Host is not Allowed, except those
// exempt says to pass (nil: none); how names the setting that adds names.
func (l *List) Handler(next http.Handler, how string, exempt func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.Allowed(r.Host) || exempt != nil && exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprintf(w, "host %q is not served here: sluice answers to localhost, IP addresses and %s "+
			"(a foreign Host is how DNS rebinding reaches a local server)\n", r.Host, how)
	})
}

func normalize(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// validName accepts DNS names: dot-separated labels of letters, digits,
// hyphens and underscores (some internal names have them).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
