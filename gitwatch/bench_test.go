package gitwatch

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
)

// BenchmarkPushToRevision measures, with a webhook (interval 1h) and with
// a 1 s poll, how long a pushed commit takes to arrive as a Revision. The
// timer (ns/op) covers the `git push` itself too; ms-median and ms-max
// count from the push returning to the Revision arriving. Making the
// commit and, in poll mode, the random wait before the push are not
// timed. Run with -benchtime 20x for the median of 20:
//
//	go test -run '^$' -bench PushToRevision -benchtime 20x ./gitwatch/
func BenchmarkPushToRevision(b *testing.B) {
	for _, mode := range []string{"webhook", "interval-1s"} {
		b.Run(mode, func(b *testing.B) {
			u := newUpstream(b)
			u.commit("c0", map[string]string{"rollouts/a.yaml": rolloutYAML("a", "shop/a:v0")})
			u.push()
			opts := testOptions(b, u.bare)
			opts.Path = "rollouts"
			opts.WebhookSecret = []byte(hookSecret)
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			if mode == "interval-1s" {
				opts.Interval = time.Second
			}
			h := startWatcher(b, opts)
			h.next(30 * time.Second)
			srv := httptest.NewServer(h.w.Handler())
			b.Cleanup(srv.Close)
			body := []byte(`{"ref":"refs/heads/main"}`)

			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				sha := u.commit(fmt.Sprintf("c%d", i+1), map[string]string{"rollouts/a.yaml": rolloutYAML("a", fmt.Sprintf("shop/a:v%d", i+1))})
				if mode == "interval-1s" {
					// Push at a random point of the poll cycle, not right
					// after the poll that delivered the previous commit.
					time.Sleep(rand.N(opts.Interval))
				}
				b.StartTimer()
				u.push()
				start := time.Now()
				if mode == "webhook" {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook/generic", strings.NewReader(string(body)))
					req.Header.Set("X-Signature", "sha256="+sign(body))
					resp, err := srv.Client().Do(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
				if r := h.next(30 * time.Second); r.Commit != sha {
					b.Fatalf("revision %s, want %s", r.Commit, sha)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
		})
	}
}

const (
	bigCommits = 10_000
	bigFiles   = 1_000
)

// fastImport writes a bare repository with bigCommits commits on main: the
// first adds bigFiles rollouts under rollouts/NN/, each later one bumps the
// image of one of them. It streams to the real `git fast-import`.
func fastImport(b *testing.B) *upstream {
	b.Helper()
	u := newUpstream(b)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = u.bare
	cmd.Env = u.env
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	data := func(s string) { fmt.Fprintf(w, "data %d\n%s\n", len(s), s) }
	for i := range bigCommits {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Ada <ada@example.com> %d +0000\n", when+int64(i))
		data(fmt.Sprintf("commit %d", i))
		if i == 0 {
			for f := range bigFiles {
				fmt.Fprintf(w, "M 100644 inline %s\n", bigFile(f))
				data(rolloutYAML(fmt.Sprintf("r%04d", f), "shop/app:v0"))
			}
			continue
		}
		f := i % bigFiles
		fmt.Fprintf(w, "M 100644 inline %s\n", bigFile(f))
		data(rolloutYAML(fmt.Sprintf("r%04d", f), fmt.Sprintf("shop/app:v%d", i)))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, stderr.String())
	}
	return u
}

func bigFile(f int) string { return fmt.Sprintf("rollouts/%02d/r%04d.yaml", f%100, f) }

// pushOne appends one commit bumping one rollout, with fast-import too.
func pushOne(b *testing.B, u *upstream, i int) {
	b.Helper()
	f := i % bigFiles
	content := rolloutYAML(fmt.Sprintf("r%04d", f), fmt.Sprintf("shop/app:x%d", i))
	stream := fmt.Sprintf("commit refs/heads/main\ncommitter Ada <ada@example.com> %d +0000\ndata 4\nbump\nfrom refs/heads/main^0\nM 100644 inline %s\ndata %d\n%s\n",
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()+int64(i), bigFile(f), len(content), content)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = u.bare
	cmd.Env = u.env
	cmd.Stdin = strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, out)
	}
}

// BenchmarkLargeRepo measures fetch cost on a repository of 10,000 commits
// and 1,000 strategy files:
//
//	go test -run '^$' -bench LargeRepo -benchtime 5x ./gitwatch/
//
// clone: empty cache to the first Revision (clone, walk, load 1,000 files).
// fetch-unchanged: a poll that finds nothing new.
// fetch-1-commit: a poll that finds one commit changing one file, with its
// Revision (a full load of --path).
// load-1000-files: api.LoadFS of the head tree alone, for comparison.
// repack: compacting the cache into one pack (done after maxPacks fetches).
func BenchmarkLargeRepo(b *testing.B) {
	start := time.Now()
	u := fastImport(b)
	b.Logf("generated %d commits, %d files with git fast-import in %s", bigCommits, bigFiles, time.Since(start))
	newW := func(b *testing.B, cacheDir string) *Watcher {
		w, err := New(Options{Repo: u.bare, CacheDir: cacheDir, Path: "rollouts",
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.cache.close)
		return w
	}
	ctx := context.Background()
	out := make(chan Revision, 16)
	drain := func(b *testing.B, want int) Revision {
		var r Revision
		for range want {
			select {
			case r = <-out:
			default:
				b.Fatalf("expected %d revisions", want)
			}
		}
		return r
	}

	b.Run("clone", func(b *testing.B) {
		for range b.N {
			w := newW(b, b.TempDir())
			if err := w.sync(ctx, out); err != nil {
				b.Fatal(err)
			}
			if r := drain(b, 1); len(r.Set.Rollouts) != bigFiles {
				b.Fatalf("%d rollouts, want %d (diagnostics %v)", len(r.Set.Rollouts), bigFiles, r.Set.Diagnostics)
			}
			w.cache.close()
		}
	})

	cacheDir := b.TempDir()
	w := newW(b, cacheDir)
	if err := w.sync(ctx, out); err != nil {
		b.Fatal(err)
	}
	drain(b, 1)
	var size int64
	_ = filepath.Walk(cacheDir, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	b.Logf("cache after clone: %.1f MiB", float64(size)/(1<<20))

	b.Run("fetch-unchanged", func(b *testing.B) {
		for range b.N {
			if err := w.sync(ctx, out); err != nil {
				b.Fatal(err)
			}
			drain(b, 0)
		}
	})

	pushes := 0 // across the framework's runs, so every push changes a file
	b.Run("fetch-1-commit", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			pushes++
			pushOne(b, u, pushes)
			b.StartTimer()
			if err := w.sync(ctx, out); err != nil {
				b.Fatal(err)
			}
			if r := drain(b, 1); !r.Changed || len(r.Set.Rollouts) != bigFiles {
				out, _ := exec.Command("git", "-C", u.bare, "log", "--stat", "-2").CombinedOutput()
				b.Fatalf("revision %s changed=%v with %d rollouts\n%s", r.Commit, r.Changed, len(r.Set.Rollouts), out)
			}
		}
	})

	b.Run("load-1000-files", func(b *testing.B) {
		repo, err := w.cache.open()
		if err != nil {
			b.Fatal(err)
		}
		c, err := repo.CommitObject(w.last)
		if err != nil {
			b.Fatal(err)
		}
		root, err := c.Tree()
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			set, err := api.LoadFS(newTreeFS(root, c.Committer.When, TreeLimits{}), "rollouts")
			if err != nil || len(set.Rollouts) != bigFiles {
				b.Fatalf("load: %v, %d rollouts", err, len(set.Rollouts))
			}
		}
	})

	// push-during-repack: a watcher running as in the daemon, whose every
	// poll asks for a repack (maxPacks 0). Commit A is pushed and handed
	// out, which starts a repack; commit B is pushed at once and its
	// webhook trigger sent. Timed: B's trigger until B's Revision, so what
	// a webhook waits while the cache is being repacked.
	b.Run("push-during-repack", func(b *testing.B) {
		// The head as last commit: no backlog, every Revision is a push.
		head := strings.TrimSpace(u.run(u.bare, "rev-parse", "refs/heads/main"))
		opts := Options{Repo: u.bare, CacheDir: cacheDir, Path: "rollouts", Interval: time.Hour,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LastCommit: head}
		w.cache.close()
		repacked := make(chan struct{}, 1)
		h := startWatcher(b, opts, func(w *Watcher) {
			w.cache.maxPacks = 0
			w.cache.afterRepack = func() { repacked <- struct{}{} }
		})
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			pushes++
			pushOne(b, u, pushes)
			h.w.Trigger()
			h.next(2 * time.Minute) // A: its poll ends by asking for a repack
			pushes++
			pushOne(b, u, pushes)
			sha := strings.TrimSpace(u.run(u.bare, "rev-parse", "refs/heads/main"))
			b.StartTimer()
			start := time.Now()
			h.w.Trigger()
			if r := h.next(2 * time.Minute); r.Commit != sha { // B
				b.Fatalf("revision %s, want %s", r.Commit, sha)
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			<-repacked // the next A starts the next repack
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
		h.stop()
	})

	// repack: what compaction costs once maxPacks is exceeded, all of it:
	// the snapshot and the swap (in the watcher's goroutine, between polls)
	// and the repack of the copy (beside the watcher).
	b.Run("repack", func(b *testing.B) {
		w := newW(b, cacheDir)
		w.cache.maxPacks = 0
		for range b.N {
			if _, err := w.cache.open(); err != nil {
				b.Fatal(err)
			}
			if err := w.cache.startRepack(); err != nil {
				b.Fatal(err)
			}
			<-w.cache.job.done
			if err := w.cache.job.err; err != nil {
				b.Fatal(err)
			}
			w.cache.finishRepack()
		}
	})
}
