package gitwatch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// remoteName is the one remote of the cache repository.
const remoteName = "origin"

// maxPacks is how many pack files may pile up before the cache is repacked.
// Every fetch that brings objects adds a pack, and an object lookup may
// consult every pack index, so a daemon that fetched ten thousand times
// would read commits ever more slowly. Repacking is not cheap either (about
// 5-8 s for 10,000 commits with go-git, see BenchmarkLargeRepo/repack), so
// it waits for a real pile, and runs beside the watcher (repack.go).
const maxPacks = 128

// repoCache is the bare clone under CacheDir. A clone is an init followed
// by the same incremental fetch every later poll does, so there is one code
// path for both. It is used only by the Run goroutine (a repack works on a
// copy in its own goroutine, see repack.go).
type repoCache struct {
	dir  string
	url  string
	log  *slog.Logger
	repo *git.Repository
	st   *boundedStorage
	// damaged is why the cache must be re-cloned before its next use; ""
	// when it is fine.
	damaged string
	// maxPacks triggers compaction; maxPacks unless a test lowers it.
	maxPacks int
	// gen counts resets, so a repack of a cache since re-cloned is
	// discarded.
	gen int
	// job is the repack in flight or finished, nil when none.
	job *repackJob
	// beforeRepack, when set, runs in the repack goroutine before it
	// works (tests hold a repack in progress with it).
	beforeRepack func()
	// afterRepack, when set, runs in the repack goroutine when it is done.
	afterRepack func()
}

func newRepoCache(cacheDir, url string, log *slog.Logger) *repoCache {
	// One directory per repository URL: pointing sluice at another
	// repository never mixes objects or refs.
	sum := sha256.Sum256([]byte(url))
	dir := filepath.Join(cacheDir, hex.EncodeToString(sum[:8])+".git")
	return &repoCache{dir: dir, url: url, log: log, maxPacks: maxPacks}
}

// markDamaged makes the next open re-clone, unless reason is the process
// running out of file descriptors: the cache is then fine, only
// unreadable for now, and re-cloning it would need descriptors too.
func (c *repoCache) markDamaged(reason error) {
	if outOfDescriptors(reason) {
		c.log.Warn("git cache unreadable: out of file descriptors; keeping it", "dir", c.dir, "reason", reason.Error())
		return
	}
	c.damaged = reason.Error()
}

// outOfDescriptors says whether err is the process (EMFILE) or the system
// (ENFILE) out of file descriptors, which says nothing about the cache's
// content (finding K2: a cache was re-cloned because idle HTTP
// connections held every descriptor).
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// open returns the cache repository, creating it when missing and
// re-creating it (with a log line) when it cannot be opened or read.
func (c *repoCache) open() (*git.Repository, error) {
	c.finishRepack()
	if c.repo != nil && c.damaged == "" {
		return c.repo, nil
	}
	if c.damaged != "" {
		c.log.Warn("git cache is corrupt, re-cloning", "dir", c.dir, "reason", c.damaged)
		c.damaged = ""
		if err := c.reset(); err != nil {
			return nil, err
		}
	}
	c.removeLeftovers()
	repo, st, err := c.openExisting()
	if outOfDescriptors(err) {
		return nil, fmt.Errorf("open git cache: %w", err)
	}
	if err != nil {
		if !errors.Is(err, git.ErrRepositoryNotExists) {
			c.log.Warn("git cache is corrupt, re-cloning", "dir", c.dir, "reason", err.Error())
		}
		if err := c.reset(); err != nil {
			return nil, err
		}
		repo, st, err = c.create()
		if err != nil {
			return nil, err
		}
	}
	c.repo, c.st = repo, st
	return repo, nil
}

func (c *repoCache) storage() *boundedStorage {
	// KeepDescriptors keeps pack files open between reads: walking history
	// and reading trees touch the same packs thousands of times.
	// LargeObjectThreshold makes a read of a larger object stream from the
	// pack instead of inflating it whole (sizes come from the pack header
	// either way); packs are indexed within the same bound (packindex.go).
	return newBoundedStorage(c.dir, filesystem.Options{KeepDescriptors: true})
}

func (c *repoCache) openExisting() (*git.Repository, *boundedStorage, error) {
	if _, err := os.Stat(c.dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, git.ErrRepositoryNotExists
	}
	st := c.storage()
	repo, err := git.Open(st, nil)
	if err == nil {
		err = c.verify(repo)
	}
	if err != nil {
		_ = st.Close()
		if errors.Is(err, git.ErrRepositoryNotExists) {
			// The directory exists but holds no repository: damaged.
			err = errors.New("no repository in cache directory")
		}
		return nil, nil, err
	}
	return repo, st, nil
}

// verify checks what every poll relies on: the remote is ours, and every
// fetched branch head, its tree and its parents' commits are readable.
func (c *repoCache) verify(repo *git.Repository) error {
	rem, err := repo.Remote(remoteName)
	if err != nil {
		return fmt.Errorf("read remote: %w", err)
	}
	if urls := rem.Config().URLs; len(urls) != 1 || urls[0] != c.url {
		return errors.New("cache belongs to another repository")
	}
	refs, err := repo.References()
	if err != nil {
		return fmt.Errorf("read refs: %w", err)
	}
	defer refs.Close()
	return refs.ForEach(func(r *plumbing.Reference) error {
		if !r.Name().IsRemote() || r.Type() != plumbing.HashReference {
			return nil
		}
		cm, err := repo.CommitObject(r.Hash())
		if err != nil {
			return fmt.Errorf("read %s: %w", r.Name(), err)
		}
		if _, err := cm.Tree(); err != nil {
			return fmt.Errorf("read tree of %s: %w", r.Name(), err)
		}
		for _, p := range cm.ParentHashes {
			if _, err := repo.CommitObject(p); err != nil {
				return fmt.Errorf("read parent of %s: %w", r.Name(), err)
			}
		}
		return nil
	})
}

func (c *repoCache) create() (*git.Repository, *boundedStorage, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create cache: %w", err)
	}
	st := c.storage()
	repo, err := git.Init(st, nil)
	if err == nil {
		_, err = repo.CreateRemote(&gitconfig.RemoteConfig{Name: remoteName, URLs: []string{c.url}})
	}
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("init cache: %w", err)
	}
	c.log.Info("git cache created", "dir", c.dir)
	return repo, st, nil
}

// reset closes and removes the cache repository. Only the per-URL
// subdirectory is removed, never CacheDir itself.
func (c *repoCache) reset() error {
	c.close()
	c.gen++
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove damaged cache: %w", err)
	}
	return nil
}

func (c *repoCache) close() {
	if c.st != nil {
		_ = c.st.Close()
	}
	c.repo, c.st = nil, nil
}
