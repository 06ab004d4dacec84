package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// What the run across clusters reads of the sluice process from outside:
// its peak RSS, a CPU profile and the levels of its log lines.

// cpuProfile takes a CPU profile of the daemon over d through its
// --debug-addr and keeps it at path ("" if it could not).
func cpuProfile(debugAddr string, d time.Duration, path string) string {
	return saveProfile(debugAddr, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), path)
}

// resetPeakRSS resets the process' VmHWM to its current RSS (clear_refs
// 5, Linux 4.0 on), so peakRSS reads the peak of what follows.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS is VmHWM from /proc/<pid>/status (0 if unreadable).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// rssSplit is RssAnon and RssFile from /proc/<pid>/status (zeros if
// unreadable): the process' own memory (heap, stacks) and the pages of
// files it maps, its binary's mostly. VmRSS is their sum (and RssShmem's).
// Two controllers of one size of heap differ in RSS by their binaries'
// pages touched: sluice's binary carries its gateway (Envoy's and gRPC's
// xDS types), its stores and git besides the Kubernetes clients.
func rssSplit(pid int) (anon, file int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, field := range []struct {
			prefix string
			to     *int64
		}{{"RssAnon:", &anon}, {"RssFile:", &file}} {
			if rest, ok := strings.CutPrefix(line, field.prefix); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					*field.to = kb << 10
				}
			}
		}
	}
	return anon, file
}

// evictFromPageCache drops a binary's pages from the page cache before it
// is started, so that every measured controller's binary is read in by its
// own page faults, as on a node that has just pulled the image. A file's
// pages stay cached in folios of the sizes they were written or read in,
// up to 2 MiB, and a fault maps the whole folio: the same sluice build,
// copied or built anew, started idle with 56 or 61 MiB of its binary's
// pages (RssFile), and two builds of equal code held 65 and 72–76 MiB of
// them through a change (docs/scale.md, "The binaries' pages"). A page some
// process still maps stays (a run's binaries are mapped by nothing else).
func evictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Dirty pages (a binary just built) cannot be dropped: write them first.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("evict %s from the page cache: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s from the page cache: %w", path, err)
	}
	return nil
}

// anonWatch samples a process' RssAnon every second and keeps the
// highest: the kernel keeps the peak of VmRSS alone (VmHWM), which
// counts the binary's pages too.
type anonWatch struct {
	stop chan struct{}
	done chan int64
}

func watchAnon(pid int) *anonWatch {
	w := &anonWatch{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		peak, _ := rssSplit(pid)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				anon, _ := rssSplit(pid)
				w.done <- max(peak, anon)
				return
			case <-t.C:
				anon, _ := rssSplit(pid)
				peak = max(peak, anon)
			}
		}
	}()
	return w
}

// end stops the sampling and returns the highest RssAnon seen.
func (w *anonWatch) end() int64 {
	close(w.stop)
	return <-w.done
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLevels counts the daemon's ERROR and WARN lines from offset on, by
// message.
func logLevels(path string, offset int64) (errs, warns map[string]int) {
	errs, warns = map[string]int{}, map[string]int{}
	fh, err := os.Open(path)
	if err != nil {
		return errs, warns
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		return errs, warns
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Level {
		case "ERROR":
			errs[line.Msg]++
		case "WARN":
			warns[line.Msg]++
		}
	}
	return errs, warns
}

// commitProfiler takes the daemon's CPU and allocation profiles over the
// commit (Config.CommitProfile). The zero value takes none.
type commitProfiler struct {
	debugAddr string
	d         time.Duration
	dir       string
}

// newCommitProfiler gives the daemon a --debug-addr of its own when cfg
// asks for commit profiles, and returns the daemon's flags.
func newCommitProfiler(cfg Config) (commitProfiler, []string, error) {
	if cfg.CommitProfile <= 0 {
		return commitProfiler{}, cfg.DaemonArgs, nil
	}
	addr, err := testkit.FreeAddr()
	if err != nil {
		return commitProfiler{}, nil, err
	}
	args := append(slices.Clone(cfg.DaemonArgs), "--debug-addr", addr)
	return commitProfiler{debugAddr: addr, d: cfg.CommitProfile, dir: cfg.Dir}, args, nil
}

// start begins both profiles and returns a function that waits for them
// and returns the files written. The daemon starts sampling as the
// request arrives, so start waits a moment before returning.
func (p commitProfiler) start() func() []string {
	if p.debugAddr == "" {
		return func() []string { return nil }
	}
	paths := make([]string, 2)
	var wg sync.WaitGroup
	wg.Go(func() { paths[0] = cpuProfile(p.debugAddr, p.d, filepath.Join(p.dir, "commit-cpu.pb.gz")) })
	wg.Go(func() {
		paths[1] = saveProfile(p.debugAddr, fmt.Sprintf("allocs?seconds=%d", int(p.d.Seconds())), filepath.Join(p.dir, "commit-allocs.pb.gz"))
	})
	time.Sleep(50 * time.Millisecond)
	return func() []string {
		wg.Wait()
		return slices.DeleteFunc(paths, func(p string) bool { return p == "" })
	}
}
