package api

import (
	"strings"
	"testing"
)

// TestRE2ProgramSize compares the estimate with the program sizes RE2
// reported through Envoy (projectcontour/contour#2043,
// envoyproxy/envoy#9171, kumahq/kuma#2139): it may err high by a few
// instructions, never low by more than 2, so a regex it passes is not
// NACKed by Envoy's limit of 100.
func TestRE2ProgramSize(t *testing.T) {
	tests := []struct {
		re    string
		envoy int // what Envoy logged
	}{
		{re: "/asdf/.*", envoy: 24},
		{re: ".*foo.*", envoy: 35},
		{re: ".*Chrome.*", envoy: 38},
		{re: "foo.*[abcd]+ooo.*", envoy: 43},
		{re: "x-envoy-(a|b|c)", envoy: 15},
		{re: "x-envoy-(a|b|c)-[grep]{3}", envoy: 28},
		{re: "a.*b.*c.*d.*e.*f.*g.*", envoy: 109},
		{re: "/static/[a-zA-Z0-9._-]{0,200}/[a-zA-Z0-9._-]{0,200}", envoy: 2013},
	}
	for _, tt := range tests {
		t.Run(tt.re, func(t *testing.T) {
			got, err := re2ProgramSize(tt.re)
			if err != nil {
				t.Fatal(err)
			}
			if got < tt.envoy-2 || got > tt.envoy*5/4 {
				t.Errorf("estimate %d, RE2 says %d: want within [-2, +25%%]", got, tt.envoy)
			}
			if (got > MaxRE2ProgramSize) != (tt.envoy > MaxRE2ProgramSize) {
				t.Errorf("estimate %d and RE2's %d disagree about the limit %d", got, tt.envoy, MaxRE2ProgramSize)
			}
		})
	}
}

// TestRegexProgramSizeRefused is finding N6: a header-route regex Envoy
// would NACK at its default program size limit was accepted. It is now an
// error naming file, line and field (the steps are on line 12 of
// stepsRollout); a modest regex still loads.
func TestRegexProgramSizeRefused(t *testing.T) {
	tests := []struct {
		name, regex, wantErr string
	}{
		{name: "the reproduction", regex: `a.*b.*c.*d.*e.*f.*g.*|x{1000}`,
			wantErr: "is over Envoy's default limit of 100 (re2.max_program_size.error_level)"},
		{name: "seven dot-stars", regex: `a.*b.*c.*d.*e.*f.*g.*`, wantErr: "RE2 program size about 115"},
		{name: "a contains match loads", regex: `.*Chrome.*`},
		{name: "an alternation loads", regex: `^(canary|beta|internal)$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := `[{setHeaderRoute: {name: testers, match: [{headerName: user-agent, headerValue: {regex: '` + tt.regex + `'}}]}}]`
			set := Load([]Source{{Name: "r.yaml", Data: stepsRollout(steps, "", "")}})
			errs := set.Diagnostics.Errors()
			if tt.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("rejected:\n%s", diagnosticText(set.Diagnostics))
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Message, tt.wantErr) {
				t.Fatalf("want one error containing %q, got:\n%s", tt.wantErr, diagnosticText(set.Diagnostics))
			}
			d := errs[0]
			if d.File != "r.yaml" || d.Line != 12 || d.Field != "spec.strategy.canary.steps[0].setHeaderRoute.match[0].headerValue.regex" {
				t.Errorf("error at %s:%d %s, want r.yaml:12 spec.strategy.canary.steps[0].setHeaderRoute.match[0].headerValue.regex", d.File, d.Line, d.Field)
			}
		})
	}
}
