package main

// The completeness test of docs/: every flag, metric name and alert event
// the code defines is documented, and everything the docs name exists.
// It lives here, in package main, because only this package can build the
// real cobra command tree (newRootCmd); the metric and alert names are read
// from the module's source (docsource_test.go), so docs/ stays plain
// markdown with no Go package of its own.

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docsDir is the repository's docs/ folder, seen from cmd/sluice.
var docsDir = filepath.Join("..", "..", "docs")

func TestDocsNameEveryMetricAndAlertEvent(t *testing.T) {
	tests := []struct {
		what string
		code func(t *testing.T) []string // what the code defines
		docs func(t *testing.T) []string // what the docs name
	}{
		{"metric", codeMetricNames, docMetricNames},
		{"alert event", codeAlertEvents, docAlertEvents},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			code, docs := tt.code(t), tt.docs(t)
			if len(code) == 0 {
				t.Fatalf("found no %s in the code: the scan is broken", tt.what)
			}
			for _, name := range code {
				if !slices.Contains(docs, name) {
					t.Errorf("%s %s is defined in the code but not documented in docs/alerts-and-metrics.md", tt.what, name)
				}
			}
			for _, name := range docs {
				if !slices.Contains(code, name) {
					t.Errorf("%s %s is documented but the code does not define it", tt.what, name)
				}
			}
		})
	}
}

func TestDocsGiveMetricLabels(t *testing.T) {
	code, docs := codeMetrics(t), docMetricLabels(t)
	for name, labels := range code {
		t.Run(name, func(t *testing.T) {
			got, ok := docs[name]
			if !ok {
				t.Fatalf("%s has no row in a metric table of docs/alerts-and-metrics.md", name)
			}
			if !slices.Equal(got, labels) {
				t.Errorf("docs/alerts-and-metrics.md gives %s the labels %v; the code defines %v", name, got, labels)
			}
		})
	}
}

// docMetricLabels reads the metric tables under "## Metrics" in
// docs/alerts-and-metrics.md: | `name` | type | labels | meaning |, the
// labels in backticks ("none" for none), sorted.
func docMetricLabels(t *testing.T) map[string][]string {
	out := map[string][]string{}
	for _, r := range sectionRows(t, "alerts-and-metrics.md", "Metrics") {
		cells := strings.Split(strings.Trim(r.text, "| "), "|")
		if len(cells) < 3 {
			continue
		}
		var labels []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[2], -1) {
			labels = append(labels, m[1])
		}
		slices.Sort(labels)
		out[r.key] = labels
	}
	return out
}

// docMetricNames lists the metrics of the tables under "## Metrics" in
// docs/alerts-and-metrics.md and every sluice_* name in any docs page. A
// histogram's _bucket, _sum and _count series count as the histogram.
func docMetricNames(t *testing.T) []string {
	names := sectionTableKeys(t, "alerts-and-metrics.md", "Metrics")
	re := regexp.MustCompile(`\bsluice_[a-z0-9_]*[a-z0-9]`)
	pages, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages in %s (%v)", docsDir, err)
	}
	for _, p := range pages {
		for _, m := range re.FindAllString(readDoc(t, filepath.Base(p)), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suffix)
			}
			if !slices.Contains(names, m) {
				names = append(names, m)
			}
		}
	}
	return names
}

// docAlertEvents lists the events of the table under "Alert events" in
// docs/alerts-and-metrics.md.
func docAlertEvents(t *testing.T) []string {
	return sectionTableKeys(t, "alerts-and-metrics.md", "Alert events")
}

// sectionTableKeys returns the first cells, written in backticks, of the
// table rows under the heading titled title (and its subsections) in page.
func sectionTableKeys(t *testing.T, page, title string) []string {
	var keys []string
	for _, r := range sectionRows(t, page, title) {
		if !slices.Contains(keys, r.key) {
			keys = append(keys, r.key)
		}
	}
	return keys
}

// tableRow is a markdown table row whose first cell is `key`.
type tableRow struct {
	key  string
	text string
}

// sectionRows returns the table rows with a backticked first cell under
// the heading titled title (and its subsections) in page.
func sectionRows(t *testing.T, page, title string) []tableRow {
	heading := regexp.MustCompile(`^(#+) (.*)$`)
	row := regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
	var rows []tableRow
	level := 0 // of the heading we are under; 0 when outside
	for _, line := range strings.Split(readDoc(t, page), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			switch {
			case strings.TrimSpace(m[2]) == title:
				level = len(m[1])
			case level > 0 && len(m[1]) <= level:
				level = 0
			}
			continue
		}
		if m := row.FindStringSubmatch(line); level > 0 && m != nil {
			rows = append(rows, tableRow{key: m[1], text: line})
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/%s: no table rows under a heading %q", page, title)
	}
	return rows
}

// cliSection is one command section of docs/cli.md: a heading naming one
// or more commands in backticks ("## `sluice promote`, `sluice abort`")
// and the flag table rows below it.
type cliSection struct {
	heading  string
	commands []string
	rows     []flagRow
}

// flagRow is a table row whose first cell names a flag: `--name`, and
// `-x` for its shorthand.
type flagRow struct {
	line   int
	text   string
	tokens []string // "--name", "-x"
}

var (
	headingRe     = regexp.MustCompile(`^#{1,6} `)
	commandNameRe = regexp.MustCompile("`(sluice(?: [a-z-]+)*)`")
	flagTokenRe   = regexp.MustCompile("`(--?[a-z][a-z0-9-]*)`")
	flagMentionRe = regexp.MustCompile(`(?:^|[^a-z0-9-])(--[a-z][a-z0-9-]*)`)
)

func parseCLIDoc(t *testing.T) (sections []cliSection, mentions []string) {
	var cur *cliSection
	sc := bufio.NewScanner(strings.NewReader(readDoc(t, "cli.md")))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for _, m := range flagMentionRe.FindAllStringSubmatch(line, -1) {
			mentions = append(mentions, m[1])
		}
		if headingRe.MatchString(line) {
			cur = nil
			if names := commandNameRe.FindAllStringSubmatch(line, -1); names != nil {
				sections = append(sections, cliSection{heading: line})
				cur = &sections[len(sections)-1]
				for _, m := range names {
					cur.commands = append(cur.commands, m[1])
				}
			}
			continue
		}
		if cur == nil || !strings.HasPrefix(line, "|") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		var tokens []string
		for _, m := range flagTokenRe.FindAllStringSubmatch(first, -1) {
			tokens = append(tokens, m[1])
		}
		if tokens != nil {
			cur.rows = append(cur.rows, flagRow{line: n, text: line, tokens: tokens})
		}
	}
	return sections, mentions
}

// command is one command of the real tree and the flags it defines.
type command struct {
	flags []*pflag.Flag
	// documented says whether the command needs a section in docs/cli.md:
	// it runs something or has flags (a bare group like `get` needs none).
	documented bool
}

// commandTree walks the real command tree, with the help and completion
// commands cobra adds when it executes, by command path ("sluice get
// rollout"). Help flags are left out.
func commandTree() map[string]command {
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	out := map[string]command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		var flags []*pflag.Flag
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !f.Hidden {
				flags = append(flags, f)
			}
		})
		out[c.CommandPath()] = command{flags: flags, documented: c.Runnable() || len(flags) > 0}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

func TestDocsCLIMatchesCommands(t *testing.T) {
	commands := commandTree()
	sections, mentions := parseCLIDoc(t)
	documented := map[string][]flagRow{} // command path -> rows of its sections
	for _, s := range sections {
		for _, c := range s.commands {
			if _, ok := commands[c]; !ok {
				t.Errorf("docs/cli.md: %q names command %s, which does not exist", s.heading, c)
			}
			documented[c] = append(documented[c], s.rows...)
		}
	}
	t.Run("every command and flag is documented", func(t *testing.T) {
		for path, cmd := range commands {
			rows, ok := documented[path]
			if !cmd.documented {
				continue
			}
			if !ok {
				t.Errorf("command %s has no section in docs/cli.md (a heading naming `%s`)", path, path)
				continue
			}
			for _, f := range cmd.flags {
				row := findRow(rows, "--"+f.Name)
				switch {
				case row == nil:
					t.Errorf("%s --%s is not in the flag table of its docs/cli.md section", path, f.Name)
				case f.Shorthand != "" && !slices.Contains(row.tokens, "-"+f.Shorthand):
					t.Errorf("docs/cli.md:%d: %s --%s: the row does not show its shorthand `-%s`", row.line, path, f.Name, f.Shorthand)
				case !mentionsDefault(row.text, f):
					t.Errorf("docs/cli.md:%d: %s --%s: the row does not give the default `%s`", row.line, path, f.Name, f.DefValue)
				}
			}
		}
	})
	t.Run("every documented flag exists", func(t *testing.T) {
		for _, s := range sections {
			for _, row := range s.rows {
				for _, tok := range row.tokens {
					if !anyCommandHas(commands, s.commands, tok) {
						t.Errorf("docs/cli.md:%d: %s is documented for %s, which has no such flag", row.line, tok, strings.Join(s.commands, ", "))
					}
				}
			}
		}
		for _, m := range mentions {
			if !anyCommandHas(commands, nil, m) {
				t.Errorf("docs/cli.md mentions %s, which no sluice command has", m)
			}
		}
	})
}

func findRow(rows []flagRow, token string) *flagRow {
	for i := range rows {
		if slices.Contains(rows[i].tokens, token) {
			return &rows[i]
		}
	}
	return nil
}

// mentionsDefault reports whether the row gives the flag's default. Zero
// defaults (empty, 0, false, none) say "not set" and are described in
// words (e.g. "30s" for a 0 that means the built-in interval), so only
// non-zero defaults must appear literally, in backticks.
func mentionsDefault(row string, f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "false", "[]":
		return true
	}
	return strings.Contains(row, "`"+f.DefValue+"`")
}

// anyCommandHas reports whether one of the named commands (all commands
// when names is nil) has the flag token ("--name" or "-x").
func anyCommandHas(commands map[string]command, names []string, token string) bool {
	for path, cmd := range commands {
		if names != nil && !slices.Contains(names, path) {
			continue
		}
		for _, f := range cmd.flags {
			if token == "--"+f.Name || (f.Shorthand != "" && token == "-"+f.Shorthand) {
				return true
			}
		}
		if token == "--help" || token == "-h" {
			return true
		}
	}
	return false
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(docsDir, name))
	if err != nil {
		t.Fatalf("read docs page: %v", err)
	}
	return string(data)
}
