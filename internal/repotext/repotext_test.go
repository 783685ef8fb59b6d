package repotext

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbidden matches what belongs to a tracker or a working log, not to the
// project: upstream references keep their repository's name
// (etcd-io/etcd#15220) and so do not match.
var forbidden = regexp.MustCompile(`(?i)\b(issues?|PR|pull request) ?#?[0-9]+\b|this session|\bhelper-[0-9]+|\bwork package|(FIELD|FACTS|DESIGN|REVIEW|NEWUSER)[-\w]*\.md`)

func TestTheRepositoryShouldSpeakOfTheProjectOnly(t *testing.T) {
	root := repoRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".sh", ".sql", ".yaml", ".yml", ".txt", ".mod", "":
		default:
			return nil
		}
		if name == "repotext_test.go" {
			return nil // the patterns themselves
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 || !forbidden.Match(b) {
			return nil // a binary, or nothing to report
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := forbidden.FindString(line); m != "" {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(m)+"  ← "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, found, "the repository names a tracker issue, a working session or a file outside it")
}

func TestThePatternShouldTellTrackerReferencesFromUpstreamOnes(t *testing.T) {
	for _, s := range []string{"see issue 24", "(issues #12)", "fixed in PR #7.", "as this session found", "helper-3 measured", "per FIELD-kube.md"} {
		assert.True(t, forbidden.MatchString(s), s)
	}
	for _, s := range []string{"etcd-io/etcd#15220", "kubernetes/kubernetes#12345", "color #fff", "its write #1", "a session-level advisory lock", "x#1"} {
		assert.False(t, forbidden.MatchString(s), s)
	}
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/converge-go/converge\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod of the converge module above the test")
		dir = parent
	}
}
