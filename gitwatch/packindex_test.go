package gitwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/memory"
)

// TestIndexPack indexes packs made by real git (`git repack`, deltas
// included) and compares the result with git's own index, entry by entry,
// on both paths: go-git's parser for packs of small objects, and the
// streaming indexer for packs with an object over the limit. Deltas over
// or into an object over the limit, and a forged object count, are
// refused.
func TestIndexPack(t *testing.T) {
	const limit = 64 << 10
	// A strategy file in versions git stores as deltas of each other.
	versions := func(u *upstream) {
		for i := range 6 {
			u.commit(fmt.Sprintf("v%d", i), map[string]string{
				"deploy/web.yaml": rolloutYAML("web", fmt.Sprintf("web:v%d", i)) + strings.Repeat("# a comment that makes the file worth a delta\n", 50),
			})
		}
	}
	big := func(n int, salt string) string {
		// Text that does not compress away, so it stays big in the pack.
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%s line %d %x\n", salt, i, i*2654435761)
		}
		return b.String()
	}
	tests := []struct {
		name    string
		repo    func(u *upstream)
		limit   int64
		refused string
		forge   bool // overwrite the object count
	}{
		{name: "small objects: go-git's parser", repo: versions, limit: maxInflateBytes},
		{name: "a large object: the streaming indexer", repo: func(u *upstream) {
			versions(u)
			u.commit("big", map[string]string{"blobs/big.txt": big(200<<10, "a")})
		}, limit: limit},
		{name: "a delta into a large object", repo: func(u *upstream) {
			u.commit("big", map[string]string{"blobs/big.txt": big(200<<10, "a")})
			u.commit("bigger", map[string]string{"blobs/big.txt": big(200<<10, "a") + "one more line\n"})
		}, limit: limit, refused: "over the limit of 65536 bytes"},
		{name: "a forged object count", repo: versions, limit: maxInflateBytes, forge: true, refused: "objects in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t)
			tt.repo(u)
			u.git("repack", "-adq", "--window=50", "--depth=50")
			packs, err := filepath.Glob(filepath.Join(u.work, ".git", "objects", "pack", "*.pack"))
			if err != nil || len(packs) != 1 {
				t.Fatalf("packs %v: %v", packs, err)
			}
			want := readIdx(t, strings.TrimSuffix(packs[0], ".pack")+".idx")
			data, err := os.ReadFile(packs[0])
			if err != nil {
				t.Fatal(err)
			}
			if tt.forge {
				copy(data[8:12], []byte{0xff, 0xff, 0xff, 0xff})
			}
			p := filepath.Join(t.TempDir(), "pack")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			entries, _, _, err := surveyPack(f, int64(len(data)), tt.limit)
			if err == nil && countDeltas(entries) == 0 {
				t.Fatal("git stored no deltas: the test does not exercise delta resolution")
			}
			w, checksum, err := indexPack(f, int64(len(data)), tt.limit, memory.NewStorage())
			if tt.refused != "" {
				if !errors.Is(err, errPackRefused) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("indexPack: %v, want refused with %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := w.Index()
			if err != nil {
				t.Fatal(err)
			}
			if checksum != want.PackfileChecksum {
				t.Errorf("checksum %s, git's %s", checksum, want.PackfileChecksum)
			}
			compareIdx(t, got, want)
		})
	}
}

func countDeltas(entries []packEntry) int {
	n := 0
	for _, e := range entries {
		if e.typ.IsDelta() {
			n++
		}
	}
	return n
}

func readIdx(t *testing.T, path string) *idxfile.MemoryIndex {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

// compareIdx checks that got has git's entries: hash, offset and CRC.
func compareIdx(t *testing.T, got, want *idxfile.MemoryIndex) {
	t.Helper()
	iter, err := want.Entries()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		e, err := iter.Next()
		if err != nil {
			break
		}
		n++
		off, err := got.FindOffset(e.Hash)
		if err != nil || uint64(off) != e.Offset {
			t.Errorf("%s: offset %d (%v), git's %d", e.Hash, off, err, e.Offset)
			continue
		}
		crc, err := got.FindCRC32(e.Hash)
		if err != nil || crc != e.CRC32 {
			t.Errorf("%s: crc %x (%v), git's %x", e.Hash, crc, err, e.CRC32)
		}
	}
	if c, _ := got.Count(); c != int64(n) {
		t.Errorf("%d entries, git's %d", c, n)
	}
}
