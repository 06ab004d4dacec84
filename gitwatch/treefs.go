package gitwatch

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeFS is a read-only fs.FS over one git tree, so api.LoadFS reads a
// commit's files straight from the object store. Regular and executable
// files and directories are visible; symlinks and submodules are not (a
// strategy file must be content of the commit itself). Every ModTime is the
// commit time. Directories deeper and paths longer than its TreeLimits
// are refused with a treeLimitError before they are read, so a walk costs
// at most the limits, whatever the tree. It is safe for concurrent use.
type treeFS struct {
	root   *object.Tree
	mod    time.Time
	limits TreeLimits

	mu    sync.Mutex
	trees map[string]*object.Tree // directory name -> tree, "." is root
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
)

func newTreeFS(root *object.Tree, mod time.Time, limits TreeLimits) *treeFS {
	return &treeFS{root: root, mod: mod, limits: limits.withDefaults(), trees: map[string]*object.Tree{".": root}}
}

// tree returns the tree of directory name, caching it: WalkDir asks for each
// directory once, ReadFile asks for a file's parent many times.
func (f *treeFS) tree(name string) (*object.Tree, error) {
	f.mu.Lock()
	t, ok := f.trees[name]
	f.mu.Unlock()
	if ok {
		return t, nil
	}
	parent, err := f.tree(path.Dir(name))
	if err != nil {
		return nil, err
	}
	e := findEntry(parent, path.Base(name))
	if e == nil || e.Mode != filemode.Dir {
		return nil, fs.ErrNotExist
	}
	t, err = parent.Tree(e.Name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.trees[name] = t
	f.mu.Unlock()
	return t, nil
}

func findEntry(t *object.Tree, base string) *object.TreeEntry {
	for i := range t.Entries {
		if t.Entries[i].Name == base {
			return &t.Entries[i]
		}
	}
	return nil
}

func (f *treeFS) blob(e *object.TreeEntry) (*object.Blob, error) {
	file, err := f.root.TreeEntryFile(e)
	if err != nil {
		return nil, err
	}
	return &file.Blob, nil
}

func visible(m filemode.FileMode) bool {
	return m == filemode.Dir || m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

// entry finds name's tree entry; nil for the root.
func (f *treeFS) entry(op, name string) (*object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return nil, nil
	}
	if err := f.limits.checkPath(name, len(name)); err != nil {
		return nil, &fs.PathError{Op: op, Path: shortPath(name), Err: err}
	}
	if err := f.limits.checkDir(path.Dir(name)); err != nil {
		return nil, &fs.PathError{Op: op, Path: shortPath(name), Err: err}
	}
	parent, err := f.tree(path.Dir(name))
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: notExist(err)}
	}
	e := findEntry(parent, path.Base(name))
	if e == nil || !visible(e.Mode) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

// notExist maps a missing parent to fs.ErrNotExist and keeps real read
// errors (a damaged object store) as they are.
func notExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fs.ErrNotExist
	}
	return err
}

func (f *treeFS) info(name string, e *object.TreeEntry) (fs.FileInfo, error) {
	if e == nil {
		return &entryInfo{name: ".", mode: fs.ModeDir | 0o755, mod: f.mod}, nil
	}
	fi := &entryInfo{name: path.Base(name), mod: f.mod}
	switch e.Mode {
	case filemode.Dir:
		fi.mode = fs.ModeDir | 0o755
	case filemode.Executable:
		fi.mode = 0o755
	default:
		fi.mode = 0o644
	}
	if e.Mode != filemode.Dir {
		b, err := f.blob(e)
		if err != nil {
			return nil, err
		}
		fi.size = b.Size
	}
	return fi, nil
}

// Stat implements fs.StatFS.
func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.entry("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.info(name, e)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fi, nil
}

// Open implements fs.FS.
func (f *treeFS) Open(name string) (fs.File, error) {
	e, err := f.entry("open", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.info(name, e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if fi.IsDir() {
		ents, err := f.ReadDir(name)
		if err != nil {
			return nil, err
		}
		return &dirFile{info: fi, entries: ents}, nil
	}
	b, err := f.blob(e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := b.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &blobFile{info: fi, r: r}, nil
}

// ReadFile implements fs.ReadFileFS.
func (f *treeFS) ReadFile(name string) ([]byte, error) {
	e, err := f.entry("read", name)
	if err != nil {
		return nil, err
	}
	if e == nil || e.Mode == filemode.Dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	b, err := f.blob(e)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	r, err := b.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	defer r.Close()
	buf := bytes.NewBuffer(make([]byte, 0, b.Size+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return buf.Bytes(), nil
}

// ReadDir implements fs.ReadDirFS; entries are sorted by name.
func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.entry("readdir", name)
	if err != nil {
		return nil, err
	}
	if e != nil && e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	if err := f.limits.checkDir(name); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: shortPath(name), Err: err}
	}
	t, err := f.tree(name)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: notExist(err)}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for i := range t.Entries {
		te := &t.Entries[i]
		if !visible(te.Mode) {
			continue
		}
		if err := f.checkChild(name, te); err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: shortPath(name), Err: err}
		}
		// The entry keeps its own name only: joining it to name here
		// made listing a deep tree quadratic.
		out = append(out, &dirEntry{fsys: f, e: te})
	}
	// Git sorts directories as if their names ended in "/"; fs wants plain
	// name order.
	sortEntries(out)
	return out, nil
}

// checkChild refuses an entry of directory dir whose path would be over
// the limits, before anyone builds that path.
func (f *treeFS) checkChild(dir string, te *object.TreeEntry) error {
	n := len(te.Name)
	if dir != "." {
		n += len(dir) + 1
	}
	if f.limits.MaxPathBytes > 0 && n > f.limits.MaxPathBytes {
		return f.limits.checkPath(path.Join(dir, te.Name), n)
	}
	if te.Mode == filemode.Dir && f.limits.MaxDepth > 0 && depth(dir)+1 > f.limits.MaxDepth {
		return f.limits.checkDir(dir + "/" + te.Name)
	}
	return nil
}

func sortEntries(ents []fs.DirEntry) {
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}

// dirEntry reads the blob size only when Info is asked for: WalkDir never
// does.
type dirEntry struct {
	fsys *treeFS
	e    *object.TreeEntry
}

func (d *dirEntry) Name() string { return d.e.Name }
func (d *dirEntry) IsDir() bool  { return d.e.Mode == filemode.Dir }
func (d *dirEntry) Type() fs.FileMode {
	if d.IsDir() {
		return fs.ModeDir
	}
	return 0
}
func (d *dirEntry) Info() (fs.FileInfo, error) { return d.fsys.info(d.e.Name, d.e) }
func (d *dirEntry) String() string             { return fs.FormatDirEntry(d) }

type entryInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i *entryInfo) Name() string       { return i.name }
func (i *entryInfo) Size() int64        { return i.size }
func (i *entryInfo) Mode() fs.FileMode  { return i.mode }
func (i *entryInfo) ModTime() time.Time { return i.mod }
func (i *entryInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *entryInfo) Sys() any           { return nil }

type blobFile struct {
	info fs.FileInfo
	r    io.ReadCloser
}

func (b *blobFile) Stat() (fs.FileInfo, error) { return b.info, nil }
func (b *blobFile) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *blobFile) Close() error               { return b.r.Close() }

type dirFile struct {
	info    fs.FileInfo
	entries []fs.DirEntry
	off     int
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.Name(), Err: errors.New("is a directory")}
}
func (d *dirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}
