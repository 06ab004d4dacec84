package gitwatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A fetched pack is indexed here, not by go-git's own pack writer: go-git's
// packfile.Parser inflates every object of a pack whole into memory while
// it resolves deltas (Parser.resolveDeltas grows a buffer to the object's
// size), so a 1 GiB file of zeros, a 1 MB pack, costs the daemon 1 GiB on
// every fetch, and on every start, a crash loop under a memory limit.
//
// The pack is spooled to a file and surveyed first: object headers and the
// sizes deltas declare, inflating to nothing. A pack whose objects all fit
// in maxInflateBytes goes to go-git's parser as before. A pack with a larger
// object is indexed by indexLarge, which hashes whole objects as a stream
// and resolves deltas only when base and result are within the bound; a
// delta over a larger object is refused (fetch error, last good revision
// kept), which git itself never produces for files over its
// core.bigFileThreshold.

// maxInflateBytes is the most one object may take in memory while a pack is
// indexed or an object read (LargeObjectThreshold). Strategy files are at
// most 1 MiB by default (--strategy-max-file-bytes); trees and commits of a
// strategy repository are far smaller than 16 MiB.
const maxInflateBytes = 16 << 20

// maxDeltaHeldBytes bounds the delta bases held at once along one delta
// chain while a large pack is indexed.
const maxDeltaHeldBytes = 4 * maxInflateBytes

// errPackRefused wraps the reasons a fetched pack is not stored.
var errPackRefused = errors.New("pack refused")

// boundedStorage is the cache's go-git storage with the pack writer above.
// Everything else is go-git's filesystem storage.
type boundedStorage struct {
	*filesystem.Storage
	dir        string // the cache directory
	maxInflate int64
}

var _ storer.PackfileWriter = (*boundedStorage)(nil)

// NewBoundedStorage is go-git storage for the repository in dir (its git
// directory: a bare repository) that never holds an object of over
// 16 MiB in memory, neither to index a fetched pack nor to read it. Other
// go-git caches of the daemon (git writeback) use it too.
func NewBoundedStorage(dir string) storage.Storer {
	return newBoundedStorage(dir, filesystem.Options{})
}

func newBoundedStorage(dir string, opts filesystem.Options) *boundedStorage {
	opts.LargeObjectThreshold = maxInflateBytes
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(), opts)
	return &boundedStorage{Storage: st, dir: dir, maxInflate: maxInflateBytes}
}

// PackfileWriter implements storer.PackfileWriter: go-git's fetch writes
// the pack it receives here.
func (s *boundedStorage) PackfileWriter() (io.WriteCloser, error) {
	dir := filepath.Join(s.dir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	return &packSpool{st: s, f: f}, nil
}

// packSpool receives a pack into a temp file; Close indexes and stores it.
type packSpool struct {
	st *boundedStorage
	f  *os.File
	n  int64
}

func (p *packSpool) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.n += int64(n)
	return n, err
}

// Close indexes the pack and moves it into objects/pack; the temp file is
// removed whatever happens.
func (p *packSpool) Close() error {
	defer os.Remove(p.f.Name())
	defer p.f.Close()
	if p.n == 0 {
		return nil // nothing fetched
	}
	w, checksum, err := indexPack(p.f, p.n, p.st.maxInflate, p.st.Storage)
	if err != nil {
		return err
	}
	if err := p.save(w, checksum); err != nil {
		return fmt.Errorf("store pack: %w", err)
	}
	p.st.Reindex()
	return nil
}

// save writes the index, then moves the pack beside it, as go-git does:
// a pack is visible only once both are there.
func (p *packSpool) save(w *idxfile.Writer, checksum plumbing.Hash) error {
	base := filepath.Join(p.st.dir, "objects", "pack", "pack-"+checksum.String())
	if _, err := os.Stat(base + ".pack"); err == nil {
		return nil // already have it
	}
	idx, err := w.Index()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(base), "tmp_idx_")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := idxfile.NewEncoder(tmp).Encode(idx); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), base+".idx"); err != nil {
		return err
	}
	return os.Rename(p.f.Name(), base+".pack")
}

// packEntry is one object of a pack as the survey found it.
type packEntry struct {
	offset int64
	typ    plumbing.ObjectType // as stored: a delta type for deltas
	length int64               // inflated bytes stored: the delta's own for deltas
	size   int64               // the object's size: for deltas, what the delta declares
	parent int64               // OFS delta: the base's offset
	ref    plumbing.Hash       // REF delta: the base's hash
	crc    uint32
	hash   plumbing.Hash
	done   bool
}

// indexPack indexes the pack in f (size bytes), holding no object over
// limit in memory; base serves the bases of a thin pack.
func indexPack(f *os.File, size, limit int64, base storer.EncodedObjectStorer) (*idxfile.Writer, plumbing.Hash, error) {
	entries, checksum, large, err := surveyPack(f, size, limit)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	w := new(idxfile.Writer)
	if !large {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, plumbing.ZeroHash, err
		}
		p, err := packfile.NewParser(packfile.NewScanner(f), w)
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		if _, err := p.Parse(); err != nil {
			return nil, plumbing.ZeroHash, err
		}
		return w, checksum, nil
	}
	ix := &largeIndexer{sc: packfile.NewScanner(f), entries: entries, limit: limit, base: base}
	if err := ix.run(); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	if err := w.OnHeader(uint32(len(entries))); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	for _, e := range entries {
		w.Add(e.hash, uint64(e.offset), e.crc)
	}
	if err := w.OnFooter(checksum); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	return w, checksum, nil
}

// minObjectBytes is the least an object takes in a pack: a header byte and
// an empty zlib stream (8 bytes).
const minObjectBytes = 9

// surveyPack reads every object header, inflating to nothing, and checks
// the pack's checksum. large says an object (or a delta's result) is over
// limit.
func surveyPack(f *os.File, size, limit int64) ([]packEntry, plumbing.Hash, bool, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, plumbing.ZeroHash, false, err
	}
	sc := packfile.NewScanner(f)
	_, count, err := sc.Header()
	if err != nil {
		return nil, plumbing.ZeroHash, false, err
	}
	// The count sizes go-git's index up front: a forged one must not.
	if int64(count) > size/minObjectBytes {
		return nil, plumbing.ZeroHash, false, fmt.Errorf("%w: header says %d objects in %d bytes", errPackRefused, count, size)
	}
	entries := make([]packEntry, 0, count)
	large := false
	for range count {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return nil, plumbing.ZeroHash, false, err
		}
		e := packEntry{offset: h.Offset, typ: h.Type, length: h.Length, size: h.Length, parent: h.OffsetReference, ref: h.Reference}
		if h.Type.IsDelta() {
			var head deltaHead
			if _, e.crc, err = sc.NextObject(&head); err != nil {
				return nil, plumbing.ZeroHash, false, err
			}
			if e.size, err = head.targetSize(); err != nil {
				return nil, plumbing.ZeroHash, false, err
			}
		} else if _, e.crc, err = sc.NextObject(io.Discard); err != nil {
			return nil, plumbing.ZeroHash, false, err
		}
		large = large || e.size > limit || e.length > limit
		entries = append(entries, e)
	}
	checksum, err := sc.Checksum()
	if err != nil {
		return nil, plumbing.ZeroHash, false, err
	}
	return entries, checksum, large, nil
}

// deltaHead keeps the first bytes of a delta: its base and result sizes.
type deltaHead struct {
	b []byte
}

func (d *deltaHead) Write(p []byte) (int, error) {
	if room := 2*10 - len(d.b); room > 0 {
		d.b = append(d.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// targetSize is the result size the delta declares (its second varint).
func (d *deltaHead) targetSize() (int64, error) {
	b := d.b
	var size int64
	for range 2 {
		size = 0
		for shift := 0; ; shift += 7 {
			if len(b) == 0 || shift > 56 {
				return 0, fmt.Errorf("%w: %w", packfile.ErrMalformedPackFile, packfile.ErrInvalidDelta)
			}
			c := b[0]
			b = b[1:]
			size |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				break
			}
		}
	}
	return size, nil
}

// largeIndexer hashes the objects of a pack that holds an object over
// limit: whole objects as a stream, deltas in memory within limit.
type largeIndexer struct {
	sc      *packfile.Scanner
	entries []packEntry
	limit   int64
	base    storer.EncodedObjectStorer

	byOffset map[int64]int
	ofsKids  map[int64][]int
	refKids  map[plumbing.Hash][]int
}

func (ix *largeIndexer) run() error {
	ix.byOffset = map[int64]int{}
	ix.ofsKids = map[int64][]int{}
	ix.refKids = map[plumbing.Hash][]int{}
	for i, e := range ix.entries {
		ix.byOffset[e.offset] = i
		switch e.typ {
		case plumbing.OFSDeltaObject:
			ix.ofsKids[e.parent] = append(ix.ofsKids[e.parent], i)
		case plumbing.REFDeltaObject:
			ix.refKids[e.ref] = append(ix.refKids[e.ref], i)
		}
	}
	for i := range ix.entries {
		if err := ix.hashWhole(i); err != nil {
			return err
		}
	}
	for i := range ix.entries {
		e := &ix.entries[i]
		if e.typ.IsDelta() || !ix.hasKids(i) {
			continue
		}
		content, err := ix.inflate(i)
		if err != nil {
			return err
		}
		if err := ix.resolveKids(i, content, e.typ, 0); err != nil {
			return err
		}
	}
	return ix.resolveThin()
}

// hashWhole hashes a non-delta object as it inflates.
func (ix *largeIndexer) hashWhole(i int) error {
	e := &ix.entries[i]
	if e.typ.IsDelta() {
		return nil
	}
	h := plumbing.NewHasher(e.typ, e.length)
	if _, err := ix.sc.SeekObjectHeader(e.offset); err != nil {
		return err
	}
	if _, _, err := ix.sc.NextObject(h); err != nil {
		return err
	}
	e.hash, e.done = h.Sum(), true
	return nil
}

func (ix *largeIndexer) kids(i int) []int {
	e := &ix.entries[i]
	return append(append([]int(nil), ix.ofsKids[e.offset]...), ix.refKids[e.hash]...)
}

func (ix *largeIndexer) hasKids(i int) bool {
	e := &ix.entries[i]
	return len(ix.ofsKids[e.offset]) > 0 || len(ix.refKids[e.hash]) > 0
}

// inflate reads an object's stored bytes (a delta's own for deltas).
func (ix *largeIndexer) inflate(i int) ([]byte, error) {
	e := &ix.entries[i]
	if e.length > ix.limit {
		return nil, fmt.Errorf("%w: object at offset %d is %d bytes, a delta base over the limit of %d bytes", errPackRefused, e.offset, e.length, ix.limit)
	}
	if _, err := ix.sc.SeekObjectHeader(e.offset); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, e.length)
	w := &sliceWriter{b: buf}
	if _, _, err := ix.sc.NextObject(w); err != nil {
		return nil, err
	}
	return w.b, nil
}

type sliceWriter struct{ b []byte }

func (s *sliceWriter) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// resolveKids applies the deltas based on object i (content, of type typ)
// depth first; held is what the chain above already holds.
func (ix *largeIndexer) resolveKids(i int, content []byte, typ plumbing.ObjectType, held int64) error {
	held += int64(len(content))
	if held > maxDeltaHeldBytes {
		return fmt.Errorf("%w: delta chain at offset %d holds over %d bytes", errPackRefused, ix.entries[i].offset, int64(maxDeltaHeldBytes))
	}
	for _, k := range ix.kids(i) {
		child, err := ix.applyDelta(k, content, typ)
		if err != nil {
			return err
		}
		if ix.hasKids(k) {
			if err := ix.resolveKids(k, child, typ, held); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyDelta resolves delta k over base and records its hash.
func (ix *largeIndexer) applyDelta(k int, base []byte, typ plumbing.ObjectType) ([]byte, error) {
	e := &ix.entries[k]
	if e.done {
		return nil, fmt.Errorf("%w: delta at offset %d resolved twice", packfile.ErrMalformedPackFile, e.offset)
	}
	if e.size > ix.limit {
		return nil, fmt.Errorf("%w: delta at offset %d makes an object of %d bytes, over the limit of %d bytes", errPackRefused, e.offset, e.size, ix.limit)
	}
	delta, err := ix.inflate(k)
	if err != nil {
		return nil, err
	}
	content, err := packfile.PatchDelta(base, delta)
	if err != nil {
		return nil, fmt.Errorf("delta at offset %d: %w", e.offset, err)
	}
	h := plumbing.NewHasher(typ, int64(len(content)))
	_, _ = h.Write(content)
	e.hash, e.done = h.Sum(), true
	return content, nil
}

// resolveThin resolves the deltas whose base is not in the pack (a thin
// pack) from the cache, and fails if any delta is left unresolved.
func (ix *largeIndexer) resolveThin() error {
	inPack := map[plumbing.Hash]bool{}
	for _, e := range ix.entries {
		if e.done {
			inPack[e.hash] = true
		}
	}
	for ref, kids := range ix.refKids {
		if inPack[ref] {
			continue
		}
		obj, err := ix.base.EncodedObject(plumbing.AnyObject, ref)
		if err != nil {
			return fmt.Errorf("delta base %s: %w", ref, err)
		}
		if obj.Size() > ix.limit {
			return fmt.Errorf("%w: delta base %s is %d bytes, over the limit of %d bytes", errPackRefused, ref, obj.Size(), ix.limit)
		}
		r, err := obj.Reader()
		if err != nil {
			return err
		}
		content, err := io.ReadAll(io.LimitReader(r, ix.limit))
		_ = r.Close()
		if err != nil {
			return err
		}
		for _, k := range kids {
			child, err := ix.applyDelta(k, content, obj.Type())
			if err != nil {
				return err
			}
			if ix.hasKids(k) {
				if err := ix.resolveKids(k, child, obj.Type(), int64(len(content))); err != nil {
					return err
				}
			}
		}
	}
	for _, e := range ix.entries {
		if !e.done {
			return fmt.Errorf("%w: delta at offset %d has no base", packfile.ErrMalformedPackFile, e.offset)
		}
	}
	return nil
}
