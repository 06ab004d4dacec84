package api

import (
	"regexp/syntax"
	"unicode/utf8"
)

// MaxRE2ProgramSize is Envoy's default limit on a regex's RE2 program
// size (runtime key re2.max_program_size.error_level, 100): Envoy NACKs a
// route whose safe_regex compiles to more, which would hold the canary.
// sluice checks it when a file is loaded rather than emitting the
// deprecated per-regex max_program_size: Envoy's own docs ask management
// servers to validate regexes, and a raised runtime limit is the
// operator's bootstrap, not ours.
const MaxRE2ProgramSize = 100

// re2ProgramSize estimates what RE2's Prog::size() reports for re, the
// number Envoy compares with its limit. Go's regexp/syntax parses the same
// language, but its program counts differently (runes, not bytes; Alt
// instructions that RE2's Flatten removes), so the estimate walks the
// simplified parse tree with RE2's costs instead:
//
//   - a literal: one instruction per UTF-8 byte;
//   - a character class: one per ASCII range, plus 11 for a class reaching
//     beyond ASCII (RE2 compiles those to UTF-8 byte sequences); "." is
//     then 13;
//   - x* and x+: x plus 2 (the loop, and the instruction Flatten copies
//     into the loop's list); x?: x plus 1;
//   - an alternation of n: the branches plus n-1; a capture: 2; an
//     empty-width assertion (^, $, \b): 1; x{n,m}: expanded, as RE2 does;
//   - 3 more: Fail, Match and the unanchored-search prefix.
//
// The costs are fitted to program sizes RE2 reported through Envoy
// (projectcontour/contour#2043, envoyproxy/envoy#9171): "/asdf/.*" 24
// (estimate 24), ".*foo.*" 35 (36), "x-envoy-(a|b|c)" 15 (14),
// "a.*b.*c.*d.*e.*f.*g.*" 109 (115), and each ".*" about 15. Newer RE2
// encodes "." in fewer instructions, so the estimate errs high: a regex
// it passes is accepted by Envoy; one within a few instructions of the
// limit may be refused although Envoy would take it.
func re2ProgramSize(expr string) (int, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0, err
	}
	return re2Cost(re.Simplify()) + 3, nil
}

// re2NonASCIICost is what a class reaching beyond ASCII adds.
const re2NonASCIICost = 11

func re2Cost(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n
	case syntax.OpCharClass:
		return classCost(re.Rune)
	case syntax.OpAnyCharNotNL:
		return 2 + re2NonASCIICost // [\x00-\x09] [\x0b-\x7f] and the rest
	case syntax.OpAnyChar:
		return 1 + re2NonASCIICost
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 1
	case syntax.OpCapture:
		return re2Cost(re.Sub[0]) + 2
	case syntax.OpStar, syntax.OpPlus:
		return re2Cost(re.Sub[0]) + 2
	case syntax.OpQuest:
		return re2Cost(re.Sub[0]) + 1
	case syntax.OpRepeat: // Simplify expands these; kept for safety
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		return n * (re2Cost(re.Sub[0]) + 1)
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += re2Cost(s)
		}
		return n
	case syntax.OpAlternate:
		n := len(re.Sub) - 1
		for _, s := range re.Sub {
			n += re2Cost(s)
		}
		return n
	}
	return 0 // empty match, no match
}

// classCost counts a class's ASCII ranges, and the UTF-8 tail once.
func classCost(ranges []rune) int {
	n, wide := 0, false
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if lo < utf8.RuneSelf {
			n++
		}
		if hi >= utf8.RuneSelf {
			wide = true
		}
	}
	if wide {
		n += re2NonASCIICost
	}
	return n
}
