package gitwatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/sluice-dev/sluice/api"
)

// The chart's memory limit (charts/sluice values: resources.limits.memory).
const chartMemoryLimit = 512 << 20

// TestHugeBlob is finding K3: a 1 GiB file of zeros, a pack of a few MB,
// made the watcher inflate it whole while indexing the fetched pack
// (go-git's Parser.resolveDeltas): 1.13 GB, and "out of memory" under a
// limit, on every start. The watcher runs in a child process, so its peak
// resident memory (VmHWM, the kernel's high-water mark) is its own and is
// measured exactly, whatever the Go runtime reserves as address space
// (which makes `ulimit -v` unreliable for Go). The huge file is both a
// strategy file under --path (over --strategy-max-file-bytes: reported,
// not read) and a file elsewhere in the repository (never read).
func TestHugeBlob(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and fetches a 1 GiB blob")
	}
	skipUnderRace(t)
	u := newUpstream(t)
	u.commit("rollout", map[string]string{"deploy/web.yaml": rolloutYAML("web", "web:v1")})
	blob := u.zeroBlob(1 << 30)
	u.git("update-index", "--add", "--cacheinfo", "100644,"+blob+",deploy/huge.yaml")
	u.git("update-index", "--add", "--cacheinfo", "100644,"+blob+",blobs/zero.bin")
	sha := u.commit("a 1 GiB file of zeros", nil)
	u.push()

	cache := t.TempDir()
	for _, run := range []string{"first start", "restart on the same cache"} {
		t.Run(run, func(t *testing.T) {
			revs, peak := runWatcherChild(t, childSpec{Repo: u.bare, Cache: cache, Path: "deploy", Revisions: 1})
			t.Logf("peak RSS %d MiB", peak>>20)
			if peak >= chartMemoryLimit {
				t.Errorf("peak RSS %d MiB, want under the chart's limit of %d MiB", peak>>20, chartMemoryLimit>>20)
			}
			got := revs[0]
			if got.Commit != sha || got.Refused || !got.HasWeb {
				t.Errorf("revision = %+v, want commit %s with rollout web loaded", got, sha)
			}
			if !strings.Contains(got.Diagnostics, "huge.yaml") || !strings.Contains(got.Diagnostics, "--strategy-max-file-bytes") {
				t.Errorf("diagnostics = %q, want huge.yaml reported over --strategy-max-file-bytes", got.Diagnostics)
			}
		})
	}
}

// TestDeepTree is finding N5: a directory nested 20,000 levels deep (a
// 744 KB push) took 1.7 GB and 90 s to read, quadratic in the depth. Now
// the commit is refused at --git-max-tree-depth, fast and small, reported
// as a Refused Set (the daemon keeps the strategy in force), and the next
// commit is read as usual.
func TestDeepTree(t *testing.T) {
	skipUnderRace(t)
	u := newUpstream(t)
	good := u.commit("rollout", map[string]string{"deploy/web.yaml": rolloutYAML("web", "web:v1")})
	u.push()
	deep := u.commitDeepTree(20000)
	u.push()
	// git commit itself overflows its stack comparing the index with a
	// tree this deep: the next commit is made from the index alone.
	if err := os.WriteFile(filepath.Join(u.work, "deploy", "web.yaml"), []byte(rolloutYAML("web", "web:v2")), 0o644); err != nil {
		t.Fatal(err)
	}
	u.git("add", "deploy/web.yaml")
	fixed := u.git("commit-tree", u.git("write-tree"), "-p", deep, "-m", "without the deep tree")
	u.git("update-ref", "HEAD", fixed)
	u.push()

	revs, peak := runWatcherChild(t, childSpec{Repo: u.bare, Cache: t.TempDir(), Path: "deploy", LastCommit: good, Revisions: 2})
	t.Logf("peak RSS %d MiB; deep tree read in %s", peak>>20, revs[0].Load)
	if peak >= 100<<20 {
		t.Errorf("peak RSS %d MiB, want under 100 MiB", peak>>20)
	}
	if got := revs[0]; got.Commit != deep || !got.Refused || !strings.Contains(got.Diagnostics, "--git-max-tree-depth") {
		t.Errorf("deep commit: %+v, want %s refused over --git-max-tree-depth", got, deep)
	}
	if revs[0].Load >= time.Second {
		t.Errorf("deep commit read in %s, want under 1s", revs[0].Load)
	}
	if len(revs[0].Diagnostics) > 1000 {
		t.Errorf("diagnostic is %d bytes, want the path shortened", len(revs[0].Diagnostics))
	}
	if got := revs[1]; got.Commit != fixed || got.Refused || !got.HasWeb {
		t.Errorf("next commit: %+v, want %s loaded", got, fixed)
	}
}

// skipUnderRace skips a test that measures memory and time: the race
// detector's shadow memory and slowdown (inflating 1 GiB takes minutes)
// would be measured too. `make unit` runs these tests without it.
func skipUnderRace(t *testing.T) {
	if raceDetector {
		t.Skip("measures memory and time: run without -race (make unit does)")
	}
}

// childSpec is what TestWatcherChild runs, passed in the environment.
type childSpec struct {
	Repo, Cache, Path, LastCommit string
	Revisions                     int
}

// childRevision is what TestWatcherChild reports of one Revision.
type childRevision struct {
	Commit      string
	Refused     bool
	HasWeb      bool
	Diagnostics string
	Load        time.Duration
}

const childEnv = "SLUICE_TEST_WATCHER_CHILD"

// runWatcherChild runs TestWatcherChild in a child process (this test
// binary) and returns the Revisions it reported and its peak RSS in bytes.
// GOMEMLIMIT and GOGC are unset for it: the memory measured is what the
// daemon would take with its defaults.
func runWatcherChild(t *testing.T, spec childSpec) ([]childRevision, int64) {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatcherChild$", "-test.count=1", "-test.v", "-test.timeout=10m")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"="+string(js))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var revs []childRevision
	peak := int64(-1)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// Lines come as t.Log prints them: "file.go:N: revision: {…}".
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, "revision: "); ok {
			var r childRevision
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			revs = append(revs, r)
		}
		if _, rest, ok := strings.Cut(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			peak = kb << 10
		}
	}
	if len(revs) != spec.Revisions || peak < 0 {
		t.Fatalf("child reported %d revisions (want %d) and peak %d:\n%s", len(revs), spec.Revisions, peak, out)
	}
	return revs, peak
}

// TestWatcherChild is the child of runWatcherChild: it follows the spec's
// repository until it has the Revisions asked for, prints them, and prints
// its own peak RSS last.
func TestWatcherChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("run by runWatcherChild")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	// A generous timeout: the test is about memory, and a loaded machine
	// may take minutes to hash 1 GiB.
	h := startWatcher(t, Options{Repo: spec.Repo, CacheDir: spec.Cache, Path: spec.Path, LastCommit: spec.LastCommit,
		Interval: time.Hour, Timeout: 8 * time.Minute})
	for range spec.Revisions {
		rev := h.next(9 * time.Minute)
		r := childRevision{
			Commit:      rev.Commit,
			Refused:     rev.Set.Refused,
			HasWeb:      rev.Set.Rollout(api.Key{Namespace: "default", Name: "web"}) != nil,
			Diagnostics: diagnosticLines(rev.Set.Diagnostics),
			Load:        rev.Load.End.Sub(rev.Load.Start),
		}
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("revision: %s", js)
	}
	h.stop()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			t.Log(line)
		}
	}
}

func diagnosticLines(ds api.Diagnostics) string {
	var lines []string
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	return strings.Join(lines, "\n")
}

// zeroBlob writes a blob of n zero bytes into the work repository with
// real git and returns its hash. The file is sparse, and over
// core.bigFileThreshold git streams it into a pack, so neither git nor the
// disk holds n bytes.
func (u *upstream) zeroBlob(n int64) string {
	u.t.Helper()
	p := filepath.Join(u.t.TempDir(), "zeros")
	f, err := os.Create(p)
	if err != nil {
		u.t.Fatal(err)
	}
	if err := f.Truncate(n); err != nil {
		u.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		u.t.Fatal(err)
	}
	u.git("config", "core.bigFileThreshold", "1m")
	u.git("config", "core.compression", "1")
	return u.git("hash-object", "-w", p)
}

// commitDeepTree commits, on top of HEAD, the tree of HEAD plus
// deploy/deep/d/d/…/x.yaml nested depth directories deep, and returns the
// commit's SHA. Real git would take minutes for 20,000 trees one process
// at a time (mktree) or quadratic time (fast-import), so the objects are
// encoded with go-git into a pack that real git checks and indexes
// (index-pack); the push that follows is real git's.
func (u *upstream) commitDeepTree(depth int) string {
	u.t.Helper()
	st := memory.NewStorage()
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			u.t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			u.t.Fatal(err)
		}
		return h
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	_, _ = w.Write([]byte("deep: true\n"))
	_ = w.Close()
	h, err := st.SetEncodedObject(blob)
	if err != nil {
		u.t.Fatal(err)
	}
	h = put(&object.Tree{Entries: []object.TreeEntry{{Name: "x.yaml", Mode: filemode.Regular, Hash: h}}})
	for range depth {
		h = put(&object.Tree{Entries: []object.TreeEntry{{Name: "d", Mode: filemode.Dir, Hash: h}}})
	}
	// deploy/ as at HEAD, plus deep/.
	deploy := object.Tree{Entries: []object.TreeEntry{{Name: "deep", Mode: filemode.Dir, Hash: h}}}
	for _, line := range strings.Split(u.git("ls-tree", "HEAD:deploy"), "\n") {
		meta, name, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		mode, err := filemode.New(f[0])
		if err != nil {
			u.t.Fatal(err)
		}
		deploy.Entries = append(deploy.Entries, object.TreeEntry{Name: name, Mode: mode, Hash: plumbing.NewHash(f[2])})
	}
	root := put(&object.Tree{Entries: []object.TreeEntry{{Name: "deploy", Mode: filemode.Dir, Hash: put(sortedTree(deploy))}}})
	sig := object.Signature{Name: "Ada", Email: "ada@example.com", When: time.Now()}
	commit := put(&object.Commit{Author: sig, Committer: sig, Message: "a directory 20,000 levels deep\n",
		TreeHash: root, ParentHashes: []plumbing.Hash{plumbing.NewHash(u.git("rev-parse", "HEAD"))}})

	var hashes []plumbing.Hash
	for h := range st.Objects {
		hashes = append(hashes, h)
	}
	var pack bytes.Buffer
	if _, err := packfile.NewEncoder(&pack, st, false).Encode(hashes, 0); err != nil {
		u.t.Fatal(err)
	}
	cmd := exec.Command("git", "index-pack", "--stdin")
	cmd.Dir, cmd.Env, cmd.Stdin = u.work, u.env, &pack
	size := pack.Len()
	if out, err := cmd.CombinedOutput(); err != nil {
		u.t.Fatalf("git index-pack: %v\n%s", err, out)
	}
	u.git("update-ref", "HEAD", commit.String())
	u.t.Logf("deep tree: %d objects, a %d KB pack", len(hashes), size>>10)
	return commit.String()
}

// sortedTree orders entries as git does (a directory as if its name ended
// in "/").
func sortedTree(t object.Tree) *object.Tree {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	for i := 1; i < len(t.Entries); i++ {
		for j := i; j > 0 && key(t.Entries[j]) < key(t.Entries[j-1]); j-- {
			t.Entries[j], t.Entries[j-1] = t.Entries[j-1], t.Entries[j]
		}
	}
	return &t
}

// TestTreeLimits checks where --git-max-tree-depth and --git-max-path-bytes
// start, and that a commit over them is a Refused Set naming the path.
func TestTreeLimits(t *testing.T) {
	tests := []struct {
		name    string
		depth   int // directories under deploy/
		file    string
		limits  TreeLimits
		refused string // "" when the tree loads
	}{
		{name: "at the depth limit", depth: 63, file: "x.yaml"},
		{name: "one past the depth limit", depth: 64, file: "x.yaml", refused: "nested more than 64 levels deep (--git-max-tree-depth)"},
		{name: "depth limit off", depth: 200, file: "x.yaml", limits: TreeLimits{MaxDepth: -1}},
		{name: "at the path limit", file: strings.Repeat("p", 100-len("deploy/")), limits: TreeLimits{MaxPathBytes: 100}},
		{name: "one past the path limit", file: strings.Repeat("p", 101-len("deploy/")), limits: TreeLimits{MaxPathBytes: 100}, refused: "longer than 100 bytes (--git-max-path-bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := memory.NewStorage()
			h := putTree(t, st, tt.file, putBlob(t, st, "a: 1\n"), filemode.Regular)
			for range tt.depth {
				h = putTree(t, st, "d", h, filemode.Dir)
			}
			h = putTree(t, st, "deploy", h, filemode.Dir)
			root, err := object.GetTree(st, h)
			if err != nil {
				t.Fatal(err)
			}
			set, err := api.LoadFS(newTreeFS(root, time.Now(), tt.limits), "deploy")
			refused, ok := treeRefusal(err)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("LoadFS: %v, want the tree loaded", err)
			case tt.refused == "":
				if set.Refused {
					t.Fatalf("set refused: %v", set.Diagnostics)
				}
			case !ok:
				t.Fatalf("LoadFS: %v, want a tree limit error", err)
			case !refused.Refused || !strings.Contains(refused.Diagnostics[0].String(), tt.refused):
				t.Fatalf("refusal %v, want %q", refused.Diagnostics, tt.refused)
			}
		})
	}
}

func putBlob(t *testing.T, st *memory.Storage, data string) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, _ := obj.Writer()
	_, _ = w.Write([]byte(data))
	_ = w.Close()
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func putTree(t *testing.T, st *memory.Storage, name string, h plumbing.Hash, mode filemode.FileMode) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	tree := object.Tree{Entries: []object.TreeEntry{{Name: name, Mode: mode, Hash: h}}}
	if err := tree.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
