package api

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// The schema walk expands every alias where it is used, so a document
// whose aliases refer to themselves never ends (a stack overflow, which
// no recover can catch), and one whose aliases nest ("billion laughs")
// grows exponentially. yaml.v3 guards its typed decoding against both
// (decode.go: alias, allowedAliasRatio) but not a walk over its Node tree,
// so checkAliases applies the same rules to a document before the walk:
// an alias met again while it is being expanded is a cycle, and once more
// than 1,000 nodes were visited, at most allowedAliasRatio of them may come
// from alias expansion. The walk then visits at most the nodes counted
// here, so its time and memory stay proportional to the file's size.

// Bounds of the alias ratio, as in yaml.v3: up to 400,000 visited nodes
// 99 % may come from aliases (a small file may use many), falling linearly
// to 10 % at 4,000,000.
const (
	aliasRatioRangeLow  = 400_000
	aliasRatioRangeHigh = 4_000_000
	aliasMinVisited     = 1000
	aliasMinExpanded    = 100
)

func allowedAliasRatio(visited int) float64 {
	switch {
	case visited <= aliasRatioRangeLow:
		return 0.99
	case visited >= aliasRatioRangeHigh:
		return 0.10
	default:
		return 0.99 - 0.89*float64(visited-aliasRatioRangeLow)/float64(aliasRatioRangeHigh-aliasRatioRangeLow)
	}
}

// aliasCheck is one pass of checkAliases over a document.
type aliasCheck struct {
	visited  int
	expanded int                 // visited nodes reached through an alias
	active   map[*yaml.Node]bool // aliases being expanded now; made on the first alias
	// path is the field path of the node being visited, as segments, so
	// that no string is built unless an alias is met.
	path []pathSegment
	// outer is the alias, written in the document itself, whose expansion
	// is under way, and outerPath its field path: what a diagnostic names.
	outer     *yaml.Node
	outerPath string
}

// pathSegment is a map key, or a list index when key is "" and index >= 0.
type pathSegment struct {
	key   string
	index int
}

// aliasError is a refused alias, with the line and field path to report.
type aliasError struct {
	line  int
	field string
	msg   string
}

// checkAliases reports the first alias cycle or excessive expansion in
// the document rooted at n, or nil.
func checkAliases(n *yaml.Node) *aliasError {
	c := &aliasCheck{}
	return c.visit(n)
}

// visit counts n and its subtree, expanding aliases.
func (c *aliasCheck) visit(n *yaml.Node) *aliasError {
	c.visited++
	if c.outer != nil {
		c.expanded++
		if c.expanded > aliasMinExpanded && c.visited > aliasMinVisited &&
			float64(c.expanded)/float64(c.visited) > allowedAliasRatio(c.visited) {
			return c.fail(fmt.Sprintf("alias *%s expands too far: %d of the %d nodes read came from aliases, over the %.0f%% allowed: excessive aliasing is refused", c.outer.Value, c.expanded, c.visited, 100*allowedAliasRatio(c.visited)))
		}
	}
	switch n.Kind {
	case yaml.AliasNode:
		return c.alias(n)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if err := c.visit(k); err != nil {
				return err
			}
			if k.Value == "<<" { // a merge key's fields belong to the map itself
				if err := c.visit(v); err != nil {
					return err
				}
				continue
			}
			c.path = append(c.path, pathSegment{key: k.Value, index: -1})
			err := c.visit(v)
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			c.path = append(c.path, pathSegment{index: i})
			err := c.visit(item)
			c.path = c.path[:len(c.path)-1]
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *aliasCheck) alias(n *yaml.Node) *aliasError {
	if n.Alias == nil {
		return nil
	}
	if c.outer == nil {
		c.outer, c.outerPath = n, c.pathString()
		defer func() { c.outer = nil }()
	}
	if c.active == nil {
		c.active = map[*yaml.Node]bool{}
	}
	if c.active[n] {
		return c.fail(fmt.Sprintf("alias *%s refers to a node that contains it (anchor &%s): an alias cycle is refused", n.Value, n.Value))
	}
	c.active[n] = true
	defer delete(c.active, n)
	return c.visit(n.Alias)
}

// pathString writes the current path as the schema walk does.
func (c *aliasCheck) pathString() string {
	p := ""
	for _, s := range c.path {
		if s.index >= 0 {
			p = indexPath(p, s.index)
		} else {
			p = childPath(p, s.key)
		}
	}
	return p
}

// fail reports at the outermost alias: the one written where the
// expansion starts, which the user can find in the file.
func (c *aliasCheck) fail(msg string) *aliasError {
	return &aliasError{line: c.outer.Line, field: c.outerPath, msg: msg}
}
