package gitwatch

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// exhaustDescriptors lowers the process's open-file limit and opens
// /dev/null until the kernel says EMFILE: the state finding K2 put the
// daemon in. The returned func gives everything back. Not parallel: the
// limit is the whole test binary's.
func exhaustDescriptors(t *testing.T) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	low := old
	low.Cur = uint64(len(entries) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	return func() {
		for _, f := range held {
			_ = f.Close()
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCacheKeptWhenOutOfDescriptors is finding K2's last step: with every
// descriptor taken, the git cache could not be opened and was judged
// corrupt and re-cloned. Running out of descriptors now leaves it alone:
// open fails with EMFILE, a failed verify marks nothing, and once
// descriptors are back the same cache opens without a re-clone.
func TestCacheKeptWhenOutOfDescriptors(t *testing.T) {
	u := newUpstream(t)
	u.commit("one", map[string]string{"rollouts/web.yaml": rolloutYAML("web", "shop/web:v1")})
	u.push()
	var logs bytes.Buffer
	c := newRepoCache(t.TempDir(), u.bare, slog.New(slog.NewTextHandler(&logs, nil)))
	repo, err := c.open()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(c.dir, "sluice-test-marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	restore := exhaustDescriptors(t)
	verr := c.verify(repo)
	c.markDamaged(verr)
	c.repo = nil // the next open reads the directory again
	_, oerr := c.open()
	restore()

	if oerr == nil || !errors.Is(oerr, syscall.EMFILE) {
		t.Fatalf("open with no descriptors left = %v, want an EMFILE error", oerr)
	}
	if c.damaged != "" {
		t.Errorf("cache marked damaged (%q) for lack of descriptors", c.damaged)
	}
	if _, err := c.open(); err != nil {
		t.Fatalf("open after descriptors are back: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the cache was re-created: %v", err)
	}
	if strings.Contains(logs.String(), "corrupt") {
		t.Errorf("logged as corrupt:\n%s", logs.String())
	}
}
