package gitwatch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// The cache is repacked beside the watcher, never in its way: a repack of
// 10,000 commits takes seconds, and a webhook must not wait for it.
//
// go-git's filesystem storage is not safe for concurrent use (its pack
// index maps are unguarded), and RepackObjects deletes the packs a reader
// of the same directory may still look objects up in. So the repack never
// touches the live cache. Between two polls, in the watcher's goroutine,
// startRepack snapshots the cache into a staging directory: its pack files
// hard-linked (they are immutable once written) and its refs and config
// copied. A goroutine repacks the staging copy with go-git while the
// watcher goes on fetching into the live cache. Between two later polls,
// withoutDeltaSearch sets pack.window to 0 in the copy's config, which
// RepackObjects reads.
func withoutDeltaSearch(repo *git.Repository) error {
	cfg, err := repo.Config()
	if err != nil {
		return err
	}
	cfg.Pack.Window = 0
	return repo.SetConfig(cfg)
}

// finishRepack swaps the copy in: the packs the live cache gained since the
// snapshot are linked into the copy, the live refs copied over it, and the
// directories exchanged by rename. No object is lost (every pack of the
// live cache is in the copy, repacked or as it was) and at most one repack
// runs at a time.

// repackJob is one repack in flight or finished.
type repackJob struct {
	staging string
	// snapshot holds the pack file names linked into staging.
	snapshot map[string]bool
	packs    int
	start    time.Time
	// gen is the cache generation it was taken from (see repoCache.gen).
	gen  int
	done chan struct{}
	err  error // set before done closes
}

// stagingDir and oldDir sit next to the cache directory, on the same file
// system, so links and renames work.
func (c *repoCache) stagingDir() string { return c.dir + ".repack" }
func (c *repoCache) oldDir() string     { return c.dir + ".old" }

// startRepack starts a repack when more than maxPacks packs have piled up
// and none is running. It runs in the watcher's goroutine.
func (c *repoCache) startRepack() error {
	if c.st == nil || c.job != nil {
		return nil
	}
	packs, err := c.st.ObjectPacks()
	if err != nil || len(packs) <= c.maxPacks {
		return err
	}
	job := &repackJob{staging: c.stagingDir(), packs: len(packs), start: time.Now(), gen: c.gen, done: make(chan struct{})}
	if job.snapshot, err = c.snapshot(job.staging); err != nil {
		_ = os.RemoveAll(job.staging)
		return fmt.Errorf("snapshot cache for repack: %w", err)
	}
	c.job = job
	go job.run(c.beforeRepack, c.afterRepack)
	return nil
}

// snapshot makes staging a copy of the cache that shares its pack files.
func (c *repoCache) snapshot(staging string) (map[string]bool, error) {
	if err := os.RemoveAll(staging); err != nil {
		return nil, err
	}
	if err := copyMeta(c.dir, staging); err != nil {
		return nil, err
	}
	return linkPacks(c.dir, staging, nil)
}

func (j *repackJob) run(before, after func()) {
	defer close(j.done)
	if after != nil {
		defer after()
	}
	if before != nil {
		before()
	}
	// The copy is read and written within the same memory bound as the
	// live cache (packindex.go), and repacked without a delta search: the
	// search reads pairs of similar objects whole (two 1 GiB blobs would
	// cost 2 GiB), and the repack is about the number of packs, not their
	// size.
	st := newBoundedStorage(j.staging, filesystem.Options{})
	defer st.Close()
	repo, err := git.Open(st, nil)
	if err == nil {
		err = withoutDeltaSearch(repo)
	}
	if err == nil {
		err = repo.RepackObjects(&git.RepackConfig{})
	}
	if err != nil {
		j.err = fmt.Errorf("repack cache copy: %w", err)
	}
}

// finishRepack swaps a finished repack in; it returns at once while the
// repack runs. It runs in the watcher's goroutine, between polls.
func (c *repoCache) finishRepack() {
	j := c.job
	if j == nil {
		return
	}
	select {
	case <-j.done:
	default:
		return
	}
	c.job = nil
	err := j.err
	if err == nil && j.gen != c.gen {
		err = errors.New("the cache was re-cloned meanwhile")
	}
	if err == nil {
		err = c.swapIn(j)
	}
	if err != nil {
		// Not a failure of any poll: the packs stay, the next pile-up
		// tries again.
		_ = os.RemoveAll(j.staging)
		c.log.Warn("git cache repack discarded", "dir", c.dir, "error", err.Error())
		return
	}
	c.log.Info("git cache repacked", "dir", c.dir, "packs", j.packs, "took", time.Since(j.start))
}

// swapIn brings the repacked copy up to date with the live cache and puts
// it in its place. The live cache is closed first; open reopens.
func (c *repoCache) swapIn(j *repackJob) error {
	if _, err := linkPacks(c.dir, j.staging, j.snapshot); err != nil {
		return fmt.Errorf("link new packs: %w", err)
	}
	if err := copyMeta(c.dir, j.staging); err != nil {
		return fmt.Errorf("copy refs: %w", err)
	}
	c.close()
	old := c.oldDir()
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(c.dir, old); err != nil {
		return err
	}
	if err := os.Rename(j.staging, c.dir); err != nil {
		// Put the live cache back; if even that fails, open re-clones.
		_ = os.Rename(old, c.dir)
		return err
	}
	return os.RemoveAll(old)
}

// removeLeftovers removes a staging copy or an old cache a crash left
// behind (the next repack would replace them, but it may never come).
func (c *repoCache) removeLeftovers() {
	if c.job != nil {
		return
	}
	for _, d := range []string{c.stagingDir(), c.oldDir()} {
		if err := os.RemoveAll(d); err != nil {
			c.log.Warn("remove a left-over git cache copy", "dir", d, "error", err.Error())
		}
	}
}

// waitRepack waits for a running repack and discards it: on shutdown, so
// no goroutine outlives Run, and before the cache is removed.
func (c *repoCache) waitRepack() {
	if c.job == nil {
		return
	}
	<-c.job.done
	_ = os.RemoveAll(c.job.staging)
	c.job = nil
}

// copyMeta copies what names objects (HEAD, config, packed-refs, refs/)
// from a cache directory into dst, replacing what dst had.
func copyMeta(src, dst string) error {
	for _, name := range []string{"HEAD", "config", "packed-refs"} {
		err := copyFile(filepath.Join(src, name), filepath.Join(dst, name))
		if err != nil && !(name == "packed-refs" && errors.Is(err, fs.ErrNotExist)) {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(dst, "refs")); err != nil {
		return err
	}
	return filepath.WalkDir(filepath.Join(src, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

// linkPacks hard-links the pack files of src not in skip into dst (a copy
// where the file system has no links) and returns the names linked.
func linkPacks(src, dst string, skip map[string]bool) (map[string]bool, error) {
	srcPacks, dstPacks := filepath.Join(src, "objects", "pack"), filepath.Join(dst, "objects", "pack")
	if err := os.MkdirAll(dstPacks, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(srcPacks)
	if err != nil {
		return nil, err
	}
	linked := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "pack-") || skip[n] {
			continue
		}
		from, to := filepath.Join(srcPacks, n), filepath.Join(dstPacks, n)
		if err := os.Link(from, to); err != nil && !errors.Is(err, fs.ErrExist) {
			if err := copyFile(from, to); err != nil {
				return nil, err
			}
		}
		linked[n] = true
	}
	return linked, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
