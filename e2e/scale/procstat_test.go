package main

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestEvictFromPageCache writes a file (its pages cached and dirty) and
// checks by mincore(2) on a mapping of it that evictFromPageCache leaves
// none of its pages cached, and that its content is intact.
func TestEvictFromPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin")
	want := make([]byte, 64*os.Getpagesize())
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, want, 0o755); err != nil {
		t.Fatal(err)
	}
	if n := cachedPages(t, path); n == 0 {
		t.Fatal("a file just written has no page in the page cache: mincore cannot tell this test anything")
	}
	if err := evictFromPageCache(path); err != nil {
		t.Fatal(err)
	}
	if n := cachedPages(t, path); n != 0 {
		t.Errorf("%d of 64 pages still cached after evictFromPageCache", n)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(want) {
		t.Errorf("content changed by the eviction (err %v)", err)
	}
}

// cachedPages counts the pages of path in the page cache (mincore over a
// mapping of it, which does not fault them in).
func cachedPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys/unix has no wrapper for mincore.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
