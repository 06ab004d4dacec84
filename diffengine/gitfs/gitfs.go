// Package gitfs reads any revision of a git repository as an fs.FS, so
// that `sluice diff --repo` can load two commits with api.LoadFS without
// checking anything out. Local repositories are opened in place; URLs are
// fetched into memory (all branches and tags).
package gitfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Repo is an opened repository.
type Repo struct {
	repo *git.Repository
}

// Options say which repository to open.
type Options struct {
	// Source is a local path (a work tree or a bare repository) or a URL
	// that go-git can fetch (https://, ssh://, file://).
	Source string
}

// Open opens a local repository, or fetches a remote one into memory.
func Open(ctx context.Context, opts Options) (*Repo, error) {
	if opts.Source == "" {
		return nil, errors.New("open repository: no path or URL given")
	}
	if _, err := os.Stat(opts.Source); err == nil {
		r, err := git.PlainOpenWithOptions(opts.Source, &git.PlainOpenOptions{DetectDotGit: true})
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w", opts.Source, err)
		}
		return &Repo{repo: r}, nil
	}
	r, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return nil, fmt.Errorf("init in-memory repository: %w", err)
	}
	remote, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{opts.Source}})
	if err != nil {
		return nil, fmt.Errorf("add remote %s: %w", opts.Source, err)
	}
	// Branches land under refs/heads so that a plain branch name resolves
	// as it would in a clone of one's own.
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Tags:     git.NoTags,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, fmt.Errorf("fetch %s: %w", opts.Source, err)
	}
	// HEAD follows the remote's default branch, so "HEAD~1" works too.
	refs, err := remote.ListContext(ctx, &git.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", opts.Source, err)
	}
	for _, ref := range refs {
		if ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference {
			if err := r.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref.Target())); err != nil {
				return nil, fmt.Errorf("set HEAD: %w", err)
			}
		}
	}
	return &Repo{repo: r}, nil
}

// FS returns the tree of a revision (anything `git rev-parse` takes that
// go-git understands: a branch, tag, commit hash or prefix, HEAD~2, ...)
// and the commit it resolved to.
func (r *Repo) FS(rev string) (fs.FS, plumbing.Hash, error) {
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("resolve revision %q: %w", rev, err)
	}
	c, err := r.repo.CommitObject(*h)
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", h, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("read tree of %s: %w", h, err)
	}
	return &treeFS{root: t, when: c.Committer.When, trees: map[string]*object.Tree{".": t}}, *h, nil
}

// treeFS is a read-only fs.FS over a git tree. Every file has the commit
// time as its modification time. Directory trees are kept once looked up,
// so a walk reads each tree once: looking every name up from the root
// made walking a deep tree quadratic.
type treeFS struct {
	root  *object.Tree
	when  time.Time
	trees map[string]*object.Tree // directory name -> tree, "." is root
}

// tree returns the tree of directory name.
func (f *treeFS) tree(name string) (*object.Tree, error) {
	if t, ok := f.trees[name]; ok {
		return t, nil
	}
	parent, err := f.tree(path.Dir(name))
	if err != nil {
		return nil, err
	}
	e, err := parent.FindEntry(path.Base(name))
	if err != nil || e.Mode != filemode.Dir {
		return nil, fs.ErrNotExist
	}
	t, err := parent.Tree(e.Name)
	if err != nil {
		return nil, err
	}
	f.trees[name] = t
	return t, nil
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
)

func (f *treeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &dir{info: f.info(".", filemode.Dir, 0), fsys: f, tree: f.root}, nil
	}
	parent, err := f.tree(path.Dir(name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	e, err := parent.FindEntry(path.Base(name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	switch e.Mode {
	case filemode.Dir:
		t, err := f.tree(name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &dir{info: f.info(path.Base(name), e.Mode, 0), fsys: f, tree: t}, nil
	case filemode.Submodule:
		// The submodule's commit is not in this repository.
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	data, err := read(parent, e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{info: f.info(path.Base(name), e.Mode, int64(len(data))), data: data}, nil
}

func (f *treeFS) ReadFile(name string) ([]byte, error) {
	opened, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer opened.Close()
	if ff, ok := opened.(*file); ok {
		return slices.Clone(ff.data), nil
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
}

func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	opened, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	d, ok := opened.(*dir)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return d.entries()
}

// read returns the content of entry e of tree t whole: strategy files are
// small, and holding the bytes makes the fs.File trivially correct.
func read(t *object.Tree, e *object.TreeEntry) ([]byte, error) {
	obj, err := t.TreeEntryFile(e)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func (f *treeFS) info(name string, m filemode.FileMode, size int64) fileInfo {
	return fileInfo{name: name, mode: m, size: size, when: f.when}
}

type fileInfo struct {
	name string
	mode filemode.FileMode
	size int64
	when time.Time
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) ModTime() time.Time { return i.when }
func (i fileInfo) IsDir() bool        { return i.mode == filemode.Dir }
func (i fileInfo) Sys() any           { return nil }
func (i fileInfo) Mode() fs.FileMode {
	switch i.mode {
	case filemode.Dir:
		return fs.ModeDir | 0o555
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Executable:
		return 0o555
	}
	return 0o444
}

// file is an open blob, read whole: strategy files are small.
type file struct {
	info fileInfo
	data []byte
	off  int
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }
func (f *file) Read(p []byte) (int, error) {
	if f.off >= len(f.data) {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.off:])
	f.off += n
	return n, nil
}

// dir is an open tree.
type dir struct {
	info fileInfo
	fsys *treeFS
	tree *object.Tree
	list []fs.DirEntry // lazily built, consumed by ReadDir(n > 0)
	read bool
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Close() error               { return nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

// entries lists the tree sorted by name (git orders directories as if
// their names ended in "/", fs.ReadDir wants plain name order), without
// submodules.
func (d *dir) entries() ([]fs.DirEntry, error) {
	out := make([]fs.DirEntry, 0, len(d.tree.Entries))
	for _, e := range d.tree.Entries {
		if e.Mode == filemode.Submodule {
			continue
		}
		out = append(out, dirEntry{tree: d.tree, entry: e, fsys: d.fsys})
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		list, err := d.entries()
		if err != nil {
			return nil, err
		}
		d.list, d.read = list, true
	}
	if n <= 0 {
		out := d.list
		d.list = nil
		return out, nil
	}
	if len(d.list) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.list))
	out := d.list[:n]
	d.list = d.list[n:]
	return out, nil
}

type dirEntry struct {
	tree  *object.Tree
	entry object.TreeEntry
	fsys  *treeFS
}

func (e dirEntry) Name() string      { return e.entry.Name }
func (e dirEntry) IsDir() bool       { return e.entry.Mode == filemode.Dir }
func (e dirEntry) Type() fs.FileMode { return e.fsys.info("", e.entry.Mode, 0).Mode().Type() }
func (e dirEntry) Info() (fs.FileInfo, error) {
	var size int64
	if e.entry.Mode != filemode.Dir {
		f, err := e.tree.TreeEntryFile(&e.entry)
		if err != nil {
			return nil, err
		}
		size = f.Size
	}
	return e.fsys.info(e.entry.Name, e.entry.Mode, size), nil
}
