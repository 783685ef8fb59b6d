// Package mdcheck checks the repository's Markdown the way a reader meets
// it: rendered by a CommonMark parser (goldmark, with GitHub's extensions).
// It reports what renders wrongly without any parse error:
//
//   - a fenced code block that is never closed, so the rest of the file
//     renders as code;
//   - a line inside a fenced code block that looks like its closing fence
//     but has text after it: CommonMark reads it as code, so the block
//     goes on, swallowing the prose and examples that follow;
//   - a relative link or image whose file does not exist, and a #fragment
//     that names no heading of the Markdown file it points into.
//
// It is a module of its own so that the library's go.mod does not carry a
// Markdown parser that only this check uses; `make lint` runs its tests,
// which check every *.md file of the repository.
package mdcheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// Problem is one defect, at a 1-based line of a file.
type Problem struct {
	File string // slash-separated, relative to the root checked
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// skipDir reports whether a directory of the tree is not the repository's
// own Markdown: hidden and underscore directories (as `make lint`'s gofmt
// step skips them), test data, vendored code and generated output.
func skipDir(rel, name string) bool {
	if rel == "." {
		return false
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "vendor" || name == "node_modules" || name == "tmp" ||
		rel == "bench/out"
}

// CheckTree checks every *.md file under root and returns the problems
// sorted by file and line. An error is returned only if the tree cannot be
// read.
func CheckTree(root string) ([]Problem, error) {
	docs := map[string]*doc{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs[rel] = parse(rel, src)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mdcheck: walk %s: %w", root, err)
	}
	var problems []Problem
	for _, d := range docs {
		problems = append(problems, d.problems...)
		problems = append(problems, d.checkLinks(root, docs)...)
	}
	sort.Slice(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return problems, nil
}

// doc is one parsed Markdown file: its fence problems, the anchors its
// headings define and the links it holds.
type doc struct {
	rel      string
	src      []byte
	problems []Problem
	anchors  map[string]bool
	links    []link
}

type link struct {
	dest string
	line int
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

func parse(rel string, src []byte) *doc {
	d := &doc{rel: rel, src: src, anchors: map[string]bool{}}
	root := md.Parser().Parse(text.NewReader(src))
	slugs := map[string]int{}
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.FencedCodeBlock:
			d.checkFence(n)
		case *ast.Heading:
			s := slug(plainText(n, src))
			if k := slugs[s]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				d.anchors[s] = true
			}
			slugs[s]++
		case *ast.Link:
			d.links = append(d.links, link{string(n.Destination), d.lineOf(n)})
		case *ast.Image:
			d.links = append(d.links, link{string(n.Destination), d.lineOf(n)})
		}
		return ast.WalkContinue, nil
	})
	return d
}

// lineOf returns the 1-based line of a node, or of its nearest ancestor
// that has a position.
func (d *doc) lineOf(n ast.Node) int {
	for ; n != nil; n = n.Parent() {
		if p := n.Pos(); p >= 0 {
			return d.line(p)
		}
	}
	return 0
}

func (d *doc) line(offset int) int { return bytes.Count(d.src[:offset], []byte("\n")) + 1 }

// lineAt returns the line of src that starts at offset, without its
// newline, and the offset of the next line.
func lineAt(src []byte, offset int) (line []byte, next int) {
	end := bytes.IndexByte(src[offset:], '\n')
	if end < 0 {
		return src[offset:], len(src)
	}
	return src[offset : offset+end], offset + end + 1
}

// checkFence finds where the block's opening fence is (goldmark records
// it as the block's position), then looks at each content line and at the
// line after the last one, which must be the closing fence.
func (d *doc) checkFence(n *ast.FencedCodeBlock) {
	open := n.Pos()
	if open < 0 {
		return
	}
	opening, after := lineAt(d.src, open)
	opening = bytes.TrimLeft(opening, " \t>")
	char := opening[0]
	width := len(opening) - len(bytes.TrimLeft(opening, string(char)))

	lines := n.Lines()
	for i := range lines.Len() {
		seg := lines.At(i)
		start := seg.Start
		for start > 0 && d.src[start-1] != '\n' {
			start--
		}
		l, next := lineAt(d.src, start)
		if fence, rest := fenceRun(l, char); fence >= width && len(bytes.TrimSpace(rest)) > 0 {
			d.problems = append(d.problems, Problem{d.rel, d.line(start), fmt.Sprintf(
				"%q is a fence with text after it, inside the code block opened at line %d: CommonMark reads it "+
					"as code, so the block goes on past it (a closing fence stands alone on its line)",
				truncate(l), d.line(open))})
		}
		after = next
	}
	if after >= len(d.src) {
		d.problems = append(d.problems, Problem{d.rel, d.line(open),
			"this code block is never closed: the rest of the file renders as code"})
		return
	}
	closing, _ := lineAt(d.src, after)
	if fence, rest := fenceRun(closing, char); fence < width || len(bytes.TrimSpace(rest)) > 0 {
		d.problems = append(d.problems, Problem{d.rel, d.line(open), fmt.Sprintf(
			"this code block ends at line %d without a closing fence (its container ended first)", d.line(after))})
	}
}

// fenceRun returns how many fence characters a line starts with (after
// indentation and block-quote markers) and what follows them.
func fenceRun(l []byte, char byte) (int, []byte) {
	l = bytes.TrimLeft(l, " \t>")
	rest := bytes.TrimLeft(l, string(char))
	return len(l) - len(rest), rest
}

func truncate(b []byte) string {
	s := string(b)
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// checkLinks resolves each relative link of d against the tree: the file
// must exist, and a fragment into a Markdown file must name a heading of
// it. Links with a scheme (https:, mailto:) and protocol-relative ones are
// not checked.
func (d *doc) checkLinks(root string, docs map[string]*doc) []Problem {
	var problems []Problem
	for _, l := range d.links {
		u, err := url.Parse(l.dest)
		if err != nil {
			problems = append(problems, Problem{d.rel, l.line, fmt.Sprintf("link %q does not parse: %v", l.dest, err)})
			continue
		}
		if u.Scheme != "" || u.Host != "" || l.dest == "" {
			continue
		}
		target := d.rel
		if u.Path != "" {
			if strings.HasPrefix(u.Path, "/") {
				target = strings.TrimPrefix(u.Path, "/")
			} else {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(d.rel), u.Path))
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
				problems = append(problems, Problem{d.rel, l.line, fmt.Sprintf("link %q: %s does not exist", l.dest, target)})
				continue
			}
		}
		if u.Fragment == "" {
			continue
		}
		if t, ok := docs[target]; ok && !t.anchors[strings.ToLower(u.Fragment)] {
			problems = append(problems, Problem{d.rel, l.line, fmt.Sprintf("link %q: %s has no heading #%s", l.dest, target, u.Fragment)})
		}
	}
	return problems
}

// plainText is a heading's text as GitHub slugs it: the text of its
// inline children, code spans and links included, markup dropped.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
		case *ast.String:
			b.Write(c.Value)
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// everything but letters, digits, hyphens and underscores dropped.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
