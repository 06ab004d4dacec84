package main

import (
	"errors"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	cgroup := func(n uint64, err error) func() (uint64, error) {
		return func() (uint64, error) { return n, err }
	}
	none := cgroup(0, errors.New("memory is not limited"))
	for _, tc := range []struct {
		name, flag, env string
		cgroup          func() (uint64, error)
		want            int64
		from            string
	}{
		{"flag in MiB", "600MiB", "", cgroup(4<<30, nil), 600 << 20, "--memory-limit"},
		{"flag in bytes", "1048576", "", none, 1 << 20, "--memory-limit"},
		{"flag with B", "2048B", "", none, 2048, "--memory-limit"},
		{"flag in GiB over the cgroup's", "1GiB", "", cgroup(512<<20, nil), 1 << 30, "--memory-limit"},
		{"off despite a cgroup limit", "off", "", cgroup(4<<30, nil), math.MaxInt64, "--memory-limit off"},
		{"cgroup limit", "", "", cgroup(1000<<20, nil), 900 << 20, "90% of the cgroup memory limit"},
		{"no cgroup limit", "", "", none, math.MaxInt64, "no cgroup memory limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := memoryLimit(tc.flag, tc.env, tc.cgroup)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || from != tc.from {
				t.Errorf("memoryLimit(%q) = %d (%s), want %d (%s)", tc.flag, got, from, tc.want, tc.from)
			}
		})
	}
}

func TestMemoryLimitRefusesBadSizes(t *testing.T) {
	for _, flag := range []string{"600M", "600 MiB", "-5MiB", "0", "MiB", "1.5GiB", "99999999999TiB"} {
		_, _, err := memoryLimit(flag, "", func() (uint64, error) { return 0, nil })
		if err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("memoryLimit(%q) = %v, want an error naming --memory-limit", flag, err)
		}
	}
}

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag int
		env  string
		want int
		from string
		keep bool
	}{
		{"default", 0, "", defaultGCPercent, "default", false},
		{"flag", 80, "", 80, "--gc-percent", false},
		{"flag over GOGC", 80, "200", 80, "--gc-percent", false},
		{"GOGC kept", 0, "200", 0, "GOGC", true},
		{"GOGC=off kept: the operator's own choice", 0, "off", 0, "GOGC", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, keep, err := gcPercent(tc.flag, tc.env)
			if err != nil || got != tc.want || from != tc.from || keep != tc.keep {
				t.Errorf("gcPercent(%d, %q) = %d, %q, keep %v, %v; want %d, %q, keep %v", tc.flag, tc.env, got, from, keep, err, tc.want, tc.from, tc.keep)
			}
		})
	}
	if _, _, _, err := gcPercent(-1, ""); err == nil || !strings.Contains(err.Error(), "--gc-percent") {
		t.Errorf("gcPercent(-1) = %v, want an error naming --gc-percent", err)
	}
}

func TestApplyGCPercentSetsTheRuntimes(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	if err := applyGCPercent(0, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("the runtime's GC percent is %d after applyGCPercent, want %d", got, defaultGCPercent)
	}
}
