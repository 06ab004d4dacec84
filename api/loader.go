package api

import (
	"crypto/sha256"
	"io/fs"
	"sync"
)

// Loader loads the same tree again and again (one commit after another)
// and re-parses only the files whose bytes changed: on a repository of
// 1,000 strategy files a one-file commit then costs the set-wide checks,
// not 1,000 parses. The result is the same as Load's.
type Loader struct {
	mu    sync.Mutex
	files map[string]cachedFile
}

type cachedFile struct {
	sum [sha256.Size]byte
	p   *parsed
}

// NewLoader returns an empty Loader.
func NewLoader() *Loader { return &Loader{files: map[string]cachedFile{}} }

// Load is api.Load with reuse of unchanged files. Files not in sources are
// forgotten.
func (l *Loader) Load(sources []Source) *Set {
	l.mu.Lock()
	defer l.mu.Unlock()
	sums := make([][sha256.Size]byte, len(sources))
	index := make(map[string]int, len(sources))
	for i, s := range sources {
		sums[i] = sha256.Sum256(s.Data)
		index[s.Name] = i
	}
	old := l.files
	files := parseAll(sources, func(s Source) *parsed {
		if c, ok := old[s.Name]; ok && c.sum == sums[index[s.Name]] {
			return c.p
		}
		return nil
	})
	l.files = make(map[string]cachedFile, len(sources))
	for i, s := range sources {
		l.files[s.Name] = cachedFile{sum: sums[i], p: files[i]}
	}
	return assemble(sources, files)
}

// LoadFS reads the strategy files under root in fsys and loads them.
func (l *Loader) LoadFS(fsys fs.FS, root string) (*Set, error) {
	srcs, err := ReadSources(fsys, root)
	if err != nil {
		return nil, err
	}
	return l.Load(srcs), nil
}
