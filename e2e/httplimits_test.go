package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSlowWebhooksAgainstTheDaemon replays the attack of issue 19 against
// `sluice run`: slow webhook bodies of almost 1 MiB. Those beyond
// --http-max-webhooks are answered 503 at once instead of each holding a
// buffer; the ones being read are cut off by --http-read-timeout; both are
// counted in /metrics; and a genuine webhook afterwards is served.
func TestSlowWebhooksAgainstTheDaemon(t *testing.T) {
	t.Parallel()
	const slots, clients = 2, 6
	repo := newGitRepo(t)
	repo.push("empty", map[string]string{"README.md": "no rollouts yet\n"})
	secret := []byte("s3cret-for-e2e")
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, repo, "--webhook-secret-file", secretFile,
		"--http-max-webhooks", fmt.Sprint(slots), "--http-read-timeout", "2s")

	slow := func() net.Conn {
		c, err := net.Dial("tcp", d.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /hook/generic HTTP/1.1\r\nHost: sluice\r\nX-Signature: sha256=%s\r\nContent-Length: %d\r\n\r\n{\"ref\":",
			strings.Repeat("ab", 32), 1<<20-1)
		return c
	}
	answer := func(c net.Conn) (int, error) {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second)) // guard against a hang, not a wait
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// All at once: whichever get a slot are held until the read timeout
	// cuts them off; the others must be answered 503 without waiting.
	codes := make(chan int, clients)
	for range clients {
		c := slow()
		go func() {
			code, err := answer(c)
			if err != nil && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
				t.Errorf("slow webhook neither refused nor cut off: %v", err)
			}
			codes <- code // 0: the connection was closed without an answer
		}()
	}
	busy, cut := 0, 0
	for range clients {
		switch code := <-codes; code {
		case http.StatusServiceUnavailable:
			busy++
		case 0, http.StatusBadRequest:
			cut++
		default:
			t.Errorf("slow webhook answered %d", code)
		}
	}
	if busy != clients-slots || cut != slots {
		t.Errorf("%d slow webhooks refused with 503 and %d cut off, want %d and %d", busy, cut, clients-slots, slots)
	}
	if got := d.metric(`sluice_http_refused_total{reason="webhook-busy"}`); got != clients-slots {
		t.Errorf("webhook-busy = %v, want %d", got, clients-slots)
	}
	if got := d.metric(`sluice_http_refused_total{reason="webhook-read-timeout"}`); got != slots {
		t.Errorf("webhook-read-timeout = %v, want %d", got, slots)
	}
	if code := postHook(t, d, secret); code != http.StatusAccepted {
		t.Errorf("genuine webhook after the attack answered %d, want 202", code)
	}
}

// TestOpenAPIRefused: `sluice run` on all interfaces without a token does
// not start, and says what to do.
func TestOpenAPIRefused(t *testing.T) {
	t.Parallel()
	// A daemon that starts anyway would run forever: the context ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, "run", "--repo", t.TempDir(), "--state-dir", filepath.Join(t.TempDir(), "state"),
		"--xds-addr", "127.0.0.1:0", "--http-addr", ":0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("sluice run --http-addr :0 without a token started:\n%s", out)
	}
	for _, want := range []string{"--api-token-file", "--insecure-api", "reachable from the network"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
}
