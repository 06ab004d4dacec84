package api

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Source is one strategy file's bytes. Name is the path used in
// diagnostics: as given on a command line, or relative to the repository
// root when read from a tree.
type Source struct {
	Name string
	Data []byte
	// unreadSize is the size of a file left unread because it is over
	// Limits.MaxFileBytes; Data is nil then.
	unreadSize int64
}

// size is the file's size, read or not.
func (s Source) size() int64 {
	if s.Data == nil {
		return s.unreadSize
	}
	return int64(len(s.Data))
}

// isStrategyFile reports whether a file name has a YAML extension.
func isStrategyFile(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

// ReadSources reads every *.yaml and *.yml file under root in fsys, in
// lexical order, skipping directories whose names start with a dot (.git
// and friends). Names are fsys paths, so with fsys at a repository root
// they are relative to that root.
//
// Each file's size is taken (fs.DirEntry.Info, which for a git tree is the
// blob header) before it is read: a file over limits.MaxFileBytes is never
// read, and comes back with no Data, to be reported as unreadable. Past
// limits.MaxFiles files or limits.MaxRevisionBytes bytes ReadSources stops
// with a *LimitError.
func ReadSources(fsys fs.FS, root string, limits Limits) ([]Source, error) {
	r := newSourceReader(limits)
	if err := r.readTree(fsys, root, func(p string) string { return p }); err != nil {
		return nil, err
	}
	return r.srcs, nil
}

// sourceReader collects sources from one or more trees, counting them all
// against one budget.
type sourceReader struct {
	limits Limits
	budget treeBudget
	srcs   []Source
	seen   map[string]bool
}

func newSourceReader(limits Limits) *sourceReader {
	limits = limits.withDefaults()
	return &sourceReader{limits: limits, budget: treeBudget{limits: limits}, seen: map[string]bool{}}
}

// readTree reads the strategy files under root; name maps an fsys path to
// the name diagnostics use.
func (r *sourceReader) readTree(fsys fs.FS, root string, name func(string) string) error {
	if root == "" {
		root = "."
	}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return nil
		}
		if !isStrategyFile(p) || !d.Type().IsRegular() {
			return nil
		}
		return r.readFile(fsys, p, name(p), d)
	})
	if err != nil {
		return fmt.Errorf("read strategy files under %s: %w", root, err)
	}
	return nil
}

// readFile reads one file, named name in diagnostics, unless it is over
// the size limit, and counts it against the budget.
func (r *sourceReader) readFile(fsys fs.FS, p, name string, d fs.DirEntry) error {
	if r.seen[name] {
		return nil
	}
	r.seen[name] = true
	info, err := d.Info()
	if err != nil {
		return err
	}
	if r.limits.fileTooLarge(info.Size()) != "" {
		r.srcs = append(r.srcs, Source{Name: name, unreadSize: info.Size()})
		return r.budget.add(name, 0)
	}
	if err := r.budget.add(name, info.Size()); err != nil {
		return err
	}
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return err
	}
	r.srcs = append(r.srcs, Source{Name: name, Data: data})
	return nil
}

// LoadFS reads the strategy files under root in fsys and loads them with
// the default Limits. A tree over a limit gives a Refused Set.
func LoadFS(fsys fs.FS, root string) (*Set, error) {
	return NewLoader(Limits{}).LoadFS(fsys, root)
}

// LoadPaths loads files and directories as named on a command line, with
// the default Limits. A file is read whatever its extension; a directory
// contributes its *.yaml and *.yml files recursively. Diagnostics name
// files as given (a directory's files as the directory joined with their
// relative path). All paths are loaded as one set, so templates resolve
// across them, and count as one tree against the limits.
func LoadPaths(paths ...string) (*Set, error) {
	return NewLoader(Limits{}).LoadPaths(paths...)
}

// readPaths reads what LoadPaths loads.
func readPaths(limits Limits, paths []string) ([]Source, error) {
	r := newSourceReader(limits)
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", p, err)
		}
		if info.IsDir() {
			err = r.readTree(os.DirFS(p), ".", func(f string) string { return filepath.Join(p, filepath.FromSlash(f)) })
		} else {
			err = r.readFile(os.DirFS(filepath.Dir(p)), filepath.Base(p), p, fs.FileInfoToDirEntry(info))
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", p, err)
		}
	}
	return r.srcs, nil
}

// refusal turns a *LimitError into the Set that reports it.
func refusal(err error) (*Set, bool) {
	var le *LimitError
	if errors.As(err, &le) {
		return refusedSet(le.Diagnostic), true
	}
	return nil, false
}
