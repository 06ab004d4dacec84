package api

import (
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
func ReadSources(fsys fs.FS, root string) ([]Source, error) {
	if root == "" {
		root = "."
	}
	var out []Source
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
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		out = append(out, Source{Name: p, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read strategy files under %s: %w", root, err)
	}
	return out, nil
}

// LoadFS reads the strategy files under root in fsys and loads them.
func LoadFS(fsys fs.FS, root string) (*Set, error) {
	srcs, err := ReadSources(fsys, root)
	if err != nil {
		return nil, err
	}
	return Load(srcs), nil
}

// LoadPaths loads files and directories as named on a command line. A file
// is read whatever its extension; a directory contributes its *.yaml and
// *.yml files recursively. Diagnostics name files as given (a directory's
// files as the directory joined with their relative path). All paths are
// loaded as one set, so templates resolve across them.
func LoadPaths(paths ...string) (*Set, error) {
	var srcs []Source
	seen := map[string]bool{}
	add := func(s Source) {
		if !seen[s.Name] {
			seen[s.Name] = true
			srcs = append(srcs, s)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", p, err)
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("load %s: %w", p, err)
			}
			add(Source{Name: p, Data: data})
			continue
		}
		dirSrcs, err := ReadSources(os.DirFS(p), ".")
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", p, err)
		}
		for _, s := range dirSrcs {
			s.Name = filepath.Join(p, filepath.FromSlash(s.Name))
			add(s)
		}
	}
	return Load(srcs), nil
}
