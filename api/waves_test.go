package api

import (
	"strings"
	"testing"
)

func TestParseWaves(t *testing.T) {
	for in, want := range map[string]string{
		"":             "",
		"1,50%,100%":   "",
		"2, 100%":      "",
		"50%,25%,100%": "sizes are cumulative and must not decrease",
		"3,2,100%":     "sizes are cumulative and must not decrease",
		"1,50%":        "the last wave is 50%: it must be 100%",
		"0,100%":       "a wave is a number of clusters (at least 1)",
		"1,150%":       "a percentage must be 1% to 100%",
		"x":            `wave 1 "x"`,
	} {
		_, err := ParseWaves(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("ParseWaves(%q): %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ParseWaves(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}
