package main

import (
	"errors"
	"math"
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
