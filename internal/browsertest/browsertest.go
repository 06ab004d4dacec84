// Package browsertest drives Debian's chromium with chromedp for the
// dashboard's tests: it finds the browser (or skips the test, saying why),
// answers the page's confirm() dialogs, waits on conditions in the page
// with a deadline, and keeps screenshots as test artifacts.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browsers are the names Chromium goes by: Debian's package first.
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Find returns the path of a Chromium binary, or "" when there is none.
func Find() string {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one headless Chromium tab for a test.
type Browser struct {
	t   testing.TB
	ctx context.Context
	// dialogs carries the messages of the confirm() dialogs the page
	// opened, each accepted: a command button must ask before it acts.
	dialogs chan string
}

// Start launches headless Chromium with a window of width×height CSS
// pixels; the test is skipped when no Chromium is installed. The browser
// ends with the test.
func Start(t testing.TB, width, height int) *Browser {
	t.Helper()
	path := Find()
	if path == "" {
		t.Skip("browser test skipped: no chromium found (apt-get install chromium, or hack/test-deps.sh; SLUICE_CHROMIUM names another binary)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(width, height),
		// Root in a container has no user namespace for the sandbox.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &Browser{t: t, ctx: ctx, dialogs: make(chan string, 16)}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	// A dialog blocks the click that opened it, so another goroutine
	// accepts it.
	opened := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			b.dialogs <- ev.Message
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// Do runs actions with a deadline, failing the test on error.
func (b *Browser) Do(timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// DoOnRendered runs actions whose first is the only one that finds an
// element (a click, a focus), again when the page rendered that element
// anew between finding and using it: the dashboard re-renders a page on
// every status event, and a person's click lands on the element shown.
func (b *Browser) DoOnRendered(timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	for {
		err := chromedp.Do(ctx, actions...)
		if err == nil {
			return
		}
		// CDP's answer for a node id the page no longer has.
		if !strings.Contains(err.Error(), "Could not find node with given id") || ctx.Err() != nil {
			b.t.Fatalf("%s: %v", what, err)
		}
	}
}

// Eval evaluates a JavaScript expression into out.
func (b *Browser) Eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("evaluate %s: decode %s: %v", expr, raw, err)
	}
}

// EvalAwait evaluates a JavaScript expression that yields a promise and
// decodes what the promise resolves to into out.
func (b *Browser) EvalAwait(expr string, timeout time.Duration, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("evaluate %s: decode %s: %v", expr, raw, err)
	}
}

// Text is the text content of the first element matching the CSS
// selector, "" when there is none.
func (b *Browser) Text(selector string) string {
	b.t.Helper()
	var s string
	b.Eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, selector), &s)
	return s
}

// WaitText polls until the text of selector contains want, failing with
// the last text seen after timeout.
func (b *Browser) WaitText(selector, want string, timeout time.Duration) {
	b.t.Helper()
	expr := fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").includes(%q)`, selector, want)
	b.WaitJS(expr, timeout, func() string {
		return fmt.Sprintf("%s has %q, want it to contain %q", selector, b.Text(selector), want)
	})
}

// WaitJS polls until the expression is true; describe says what was seen
// when it never is.
func (b *Browser) WaitJS(expr string, timeout time.Duration, describe func() string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil || !ok {
		b.t.Fatalf("after %s: %s (%v)", timeout, describe(), err)
	}
}

// Dialog returns the message of the next confirm() dialog, failing when
// none opens within timeout.
func (b *Browser) Dialog(timeout time.Duration) string {
	b.t.Helper()
	select {
	case m := <-b.dialogs:
		return m
	case <-time.After(timeout):
		b.t.Fatalf("no confirmation dialog within %s", timeout)
		return ""
	}
}

// Screenshot saves the full page as name.png under ArtifactDir and
// returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	return b.save(name, chromedp.FullScreenshot(100))
}

// ViewportScreenshot saves what the window shows, for pages too long to
// capture whole in good time.
func (b *Browser) ViewportScreenshot(name string) string {
	b.t.Helper()
	return b.save(name, chromedp.CaptureScreenshot())
}

func (b *Browser) save(name string, shot chromedp.Action[[]byte]) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(ArtifactDir(b.t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// ArtifactDir is $SLUICE_ARTIFACTS/<test name> when that is set (kept
// after the run, for CI to upload), else a directory under t.TempDir().
func ArtifactDir(t testing.TB) string {
	t.Helper()
	root := os.Getenv("SLUICE_ARTIFACTS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
