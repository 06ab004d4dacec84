package gitwatch

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/gittest"
)

// stallProxy is a TCP listener that accepts connections and never answers
// them, like a remote that hangs, until forwardTo makes it proxy every
// later connection to a real server.
type stallProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	held   []net.Conn
}

func newStallProxy(t *testing.T) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) forwardTo(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.held = append(p.held, c)
		p.mu.Unlock()
		if target != "" {
			go pipe(c, target)
		}
	}
}

func pipe(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// close stops accepting and drops every connection, which also ends the
// operations a watcher abandoned on them.
func (p *stallProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.held {
		c.Close()
	}
}

// TestGitTimeout: a remote that accepts the connection and never answers
// makes the poll fail with a timeout (status, log, metric) instead of
// blocking the watcher; once the remote answers, a trigger fetches.
func TestGitTimeout(t *testing.T) {
	tests := []struct {
		name  string
		serve func(t *testing.T) (target string, auth Auth)
		url   func(proxy string) string
	}{
		{
			name: "http",
			serve: func(t *testing.T) (string, Auth) {
				srv, _, _ := gitServer(t)
				if err := srv.StartHTTP(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(srv.StopHTTP)
				return strings.TrimPrefix(srv.HTTPAddress(), "http://"), Auth{}
			},
			url: func(proxy string) string { return "http://" + proxy + "/org/repo.git" },
		},
		{
			name: "ssh",
			serve: func(t *testing.T) (string, Auth) {
				srv, _, _ := gitServer(t)
				srv.KeyDir(t.TempDir())
				srv.Auth("", "")
				key, pub := gittest.SSHKey(t, "")
				gittest.ServeSSH(t, srv, pub)
				return strings.TrimPrefix(srv.SSHAddress(), "ssh://git@"),
					Auth{SSHKeyFile: writeFile(t, "id", string(key)), InsecureIgnoreHostKey: true}
			},
			url: func(proxy string) string { return "ssh://git@" + proxy + "/org/repo.git" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, auth := tt.serve(t)
			proxy := newStallProxy(t)
			opts := testOptions(t, tt.url(proxy.addr()))
			opts.Auth = auth
			opts.Timeout = 300 * time.Millisecond
			h := startWatcher(t, opts)

			// The metric is recorded when the fetch ends, the status a moment
			// later when the poll records its outcome: wait for both.
			eventually(t, 20*time.Second, "a timed-out fetch in the metric and the status", func() bool {
				s := h.w.Status()
				return fetchCount(t, h.reg, resultTimeout) > 0 && s.Failures > 0 && strings.Contains(s.LastError, "timed out after 300ms")
			})
			eventually(t, 5*time.Second, "the failure logged", func() bool {
				return strings.Contains(h.logs.String(), "git sync failed") && strings.Contains(h.logs.String(), "timed out")
			})

			proxy.forwardTo(target)
			h.w.Trigger()
			r := h.next(20 * time.Second)
			if r.Commit == "" {
				t.Fatal("no revision after the remote recovered")
			}
			// The poll records its outcome after handing out the Revision.
			eventually(t, 5*time.Second, "the error cleared", func() bool { return h.w.Status().LastError == "" })
		})
	}
}
