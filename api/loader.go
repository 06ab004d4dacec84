package api

import (
	"crypto/sha256"
	"io/fs"
	"slices"
	"sync"
)

// Loader loads the same tree again and again (one commit after another)
// and re-parses only the files whose bytes changed: on a repository of
// 1,000 strategy files a one-file commit then costs the set-wide checks,
// not 1,000 parses. The result is the same as Load's.
type Loader struct {
	limits Limits
	mode   Mode
	// watched limits the rollouts to these namespaces (nil: all).
	watched []string

	mu    sync.Mutex
	files map[string]cachedFile
}

type cachedFile struct {
	sum [sha256.Size]byte
	p   *parsed
}

// NewLoader returns an empty Loader that applies limits (zero fields take
// their defaults).
func NewLoader(limits Limits) *Loader {
	return &Loader{limits: limits.withDefaults(), files: map[string]cachedFile{}}
}

// ForKubernetes makes the Loader check and convert rollouts for
// Kubernetes mode (ModeKubernetes); it returns l.
func (l *Loader) ForKubernetes() *Loader {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode = ModeKubernetes
	return l
}

// WatchNamespaces refuses every rollout outside namespaces (none: all
// namespaces): a sluice given namespaced permissions (the chart's
// watchNamespaces) cannot run pods elsewhere, so such a rollout is
// rejected with an error at its metadata.namespace instead of failing in
// the cluster later. It returns l.
func (l *Loader) WatchNamespaces(namespaces []string) *Loader {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watched = slices.Clone(namespaces)
	return l
}

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
	files := parseAll(sources, l.limits, func(s Source) *parsed {
		if c, ok := old[s.Name]; ok && s.Data != nil && c.sum == sums[index[s.Name]] {
			return c.p
		}
		return nil
	})
	l.files = make(map[string]cachedFile, len(sources))
	for i, s := range sources {
		if s.Data != nil { // an unread file has no bytes to compare next time
			l.files[s.Name] = cachedFile{sum: sums[i], p: files[i]}
		}
	}
	set := assemble(sources, files, l.mode)
	set.restrictNamespaces(l.watched)
	return set
}

// LoadFS reads the strategy files under root in fsys and loads them. A
// tree over the file count or byte limit is not loaded: the Set is
// Refused, with one diagnostic saying which limit, and the Loader keeps
// what it knew. The error is for failures to read.
func (l *Loader) LoadFS(fsys fs.FS, root string) (*Set, error) {
	srcs, err := ReadSources(fsys, root, l.limits)
	if set, refused := refusal(err); refused {
		return set, nil
	}
	if err != nil {
		return nil, err
	}
	return l.Load(srcs), nil
}

// LoadPaths is api.LoadPaths with this Loader's limits.
func (l *Loader) LoadPaths(paths ...string) (*Set, error) {
	srcs, err := readPaths(l.limits, paths)
	if set, refused := refusal(err); refused {
		return set, nil
	}
	if err != nil {
		return nil, err
	}
	return l.Load(srcs), nil
}
