package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// cgroupShare is the part of a cgroup's memory limit the Go runtime is
// told to stay under by default: the rest is headroom for what the runtime
// does not count (as automemlimit's default).
const cgroupShare = 0.9

// memoryLimit is the soft memory limit the daemon runs with (the Go
// runtime's, runtime/debug.SetMemoryLimit): the flag's value ("off" for
// none); else GOMEMLIMIT, which the runtime already applied; else 90 % of
// the cgroup's memory limit when there is one; else none. A limit makes
// the garbage collector run more often as the heap nears it: it trades
// CPU for RSS, and it is soft (a live heap above it is not an error).
// It returns the limit (math.MaxInt64: none) and where it came from.
func memoryLimit(flag, env string, cgroup func() (uint64, error)) (int64, string, error) {
	switch {
	case flag == "off":
		return math.MaxInt64, "--memory-limit off", nil
	case flag != "":
		n, err := parseBytes(flag)
		if err != nil {
			return 0, "", fmt.Errorf("--memory-limit: %w", err)
		}
		return n, "--memory-limit", nil
	case env != "":
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT", nil
	}
	max, err := cgroup()
	if err != nil || max == 0 || max >= math.MaxInt64 {
		return math.MaxInt64, "no cgroup memory limit", nil
	}
	return int64(float64(max) * cgroupShare), "90% of the cgroup memory limit", nil
}

// applyMemoryLimit sets the limit --memory-limit asks for and logs it.
func applyMemoryLimit(flag string, log *slog.Logger) error {
	n, from, err := memoryLimit(flag, os.Getenv("GOMEMLIMIT"), memlimit.FromCgroup)
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(n)
	if n == math.MaxInt64 {
		log.Info("no soft memory limit", "from", from)
		return nil
	}
	log.Info("soft memory limit", "MiB", n>>20, "from", from)
	return nil
}

// parseBytes reads a size in GOMEMLIMIT's syntax: a whole number of bytes
// with an optional unit B, KiB, MiB, GiB or TiB.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size: want a positive whole number with an optional unit B, KiB, MiB, GiB or TiB (e.g. 600MiB), or off", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New(s + " is too large")
	}
	return n << shift, nil
}

// defaultGCPercent is the daemon's GOGC unless GOGC or --gc-percent says
// otherwise. Go's default, 100, lets the heap grow to twice what is live
// before each collection; a change of every rollout then peaked at 1.28×
// the RSS of Argo Rollouts' controller on equal work, and at 50 at 1.07×
// for 16 % more CPU in the change (docs/scale.md, "GC percent").
const defaultGCPercent = 50

// gcPercent is the collector's target the daemon runs with (Go's GOGC,
// runtime/debug.SetGCPercent): the flag's value when set; else GOGC,
// which the runtime already applied (keep is true: nothing to set); else
// defaultGCPercent. It returns where the value came from.
func gcPercent(flag int, env string) (percent int, from string, keep bool, err error) {
	switch {
	case flag < 0:
		return 0, "", false, fmt.Errorf("--gc-percent %d: want a positive percentage (or leave it unset)", flag)
	case flag > 0:
		return flag, "--gc-percent", false, nil
	case env != "":
		return 0, "GOGC", true, nil
	}
	return defaultGCPercent, "default", false, nil
}

// applyGCPercent sets the target --gc-percent asks for and logs it.
func applyGCPercent(flag int, log *slog.Logger) error {
	n, from, keep, err := gcPercent(flag, os.Getenv("GOGC"))
	if err != nil {
		return err
	}
	if keep {
		log.Info("garbage collector target", "GOGC", os.Getenv("GOGC"), "from", from)
		return nil
	}
	debug.SetGCPercent(n)
	log.Info("garbage collector target", "percent", n, "from", from)
	return nil
}
