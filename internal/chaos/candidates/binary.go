//go:build linux

package candidates

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// pkg is the import path of the candidate program.
const pkg = "github.com/converge-go/converge/internal/chaos/candidate"

// Binary is the candidate program, built on first use into a temporary
// directory. Its zero value is ready to use; Remove deletes it.
type Binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the path of the candidate's executable. The first call
// builds it with the go command (with -race if this program is built with
// -race), from within the module; later calls return the same path, or
// the same error.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "converge-candidate-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "candidate")
		args := []string{"build", "-o", b.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return b.path, b.err
}

// Remove deletes the executable and its directory, if Path built them. It
// must not run concurrently with Path.
func (b *Binary) Remove() error {
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}
