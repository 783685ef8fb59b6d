package mdcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The repository's root, two levels up from this package.
const repoRoot = "../.."

func TestEveryMarkdownFileOfTheRepositoryShouldRenderAsWrittenAndLinkOnlyToFilesThatExist(t *testing.T) {
	problems, err := CheckTree(repoRoot)
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
}

// tree writes files (slash-separated name → content) under a temporary
// directory and returns the problems CheckTree finds in it, as strings.
func tree(t *testing.T, files map[string]string) []string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	problems, err := CheckTree(root)
	require.NoError(t, err)
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	return out
}

func TestAClosingFenceWithTextAfterItShouldBeReportedAtItsLine(t *testing.T) {
	got := tree(t, map[string]string{"a.md": strings.Join([]string{
		"# A",
		"",
		"```go",
		"x := 1",
		"``` This sentence was meant as prose.",
		"",
		"```go",
		"y := 2",
		"```",
		"",
	}, "\n")})
	require.Len(t, got, 2, "%q", got)
	assert.Contains(t, got[0], "a.md:5: ")
	assert.Contains(t, got[0], "is a fence with text after it")
	assert.Contains(t, got[1], "a.md:7: ", "the next block's opening fence is swallowed the same way")
}

func TestAFenceNeverClosedShouldBeReportedAtItsOpening(t *testing.T) {
	got := tree(t, map[string]string{"a.md": "# A\n\ntext\n\n```sh\nmake test\n\nmore text\n"})
	require.Len(t, got, 1, "%q", got)
	assert.Contains(t, got[0], "a.md:5: this code block is never closed")
}

func TestALongerFenceShouldHoldShorterFencesWithInfoStringsWithoutComplaint(t *testing.T) {
	got := tree(t, map[string]string{"a.md": "````markdown\n```go\nx := 1\n```\n````\n\n~~~\n```\n~~~\n"})
	assert.Empty(t, got)
}

func TestAFenceInAListItemShouldCloseAtItsIndentation(t *testing.T) {
	got := tree(t, map[string]string{"a.md": "- step:\n\n  ```sql\n  SELECT 1;\n  ```\n\n- next\n"})
	assert.Empty(t, got)
}

func TestALinkToAMissingFileShouldBeReportedAndOneToAnExistingFileOrURLShouldNot(t *testing.T) {
	got := tree(t, map[string]string{
		"README.md": "# R\n\nSee [the guide](docs/guide.md), [gone](docs/gone.md), ![chart](docs/images/c.svg),\n" +
			"[code](queue/queue.go), [dir](docs/), [web](https://example.com/x.md), [mail](mailto:a@b.c).\n",
		"docs/guide.md":      "# Guide\n\nBack to the [README](../README.md).\n",
		"docs/images/x.svg":  "<svg/>",
		"queue/queue.go":     "package queue\n",
		".hidden/broken.md":  "[x](nothing.md)\n",
		"bench/out/table.md": "[x](nothing.md)\n",
	})
	require.Len(t, got, 2, "%q", got)
	assert.Contains(t, got[0], `README.md:3: link "docs/gone.md": docs/gone.md does not exist`)
	assert.Contains(t, got[1], `README.md:3: link "docs/images/c.svg": docs/images/c.svg does not exist`)
}

func TestAFragmentShouldNameAHeadingOfTheFileItPointsInto(t *testing.T) {
	got := tree(t, map[string]string{
		"README.md": "# Read me\n\n## The `queue` package, step 2\n\n## Setup\n\n## Setup\n\n" +
			"[a](#the-queue-package-step-2) [b](#setup-1) [c](docs/g.md#how-to-start) [d](#nowhere) [e](docs/g.md#gone)\n",
		"docs/g.md": "# G\n\n### How to start?\n",
	})
	require.Len(t, got, 2, "%q", got)
	assert.Contains(t, got[0], `link "#nowhere": README.md has no heading #nowhere`)
	assert.Contains(t, got[1], `link "docs/g.md#gone": docs/g.md has no heading #gone`)
}
