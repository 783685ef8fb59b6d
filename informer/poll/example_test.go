package poll_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/poll"
)

// A directory as a Source: each file is a key, and its size and modification
// time say whether it changed, which is far cheaper than comparing contents.
func Example() {
	dir, err := os.MkdirTemp("", "poll-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			panic(err)
		}
	}

	type file struct {
		Name    string
		Size    int64
		ModTime time.Time
	}
	listDir := func(context.Context) ([]file, error) {
		entries, err := os.ReadDir(dir) // sorted by name
		if err != nil {
			return nil, err
		}
		files := make([]file, 0, len(entries))
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			files = append(files, file{Name: e.Name(), Size: info.Size(), ModTime: info.ModTime()})
		}
		return files, nil
	}
	src, err := poll.New(listDir, func(f file) string { return f.Name },
		poll.WithInterval(10*time.Millisecond),
		poll.WithEqual(func(a, b file) bool { return a.Size == b.Size && a.ModTime.Equal(b.ModTime) }))
	if err != nil {
		log.Fatal(err)
	}

	write("a.conf", "a")
	write("b.conf", "b")
	files, rev, _ := src.List(context.Background())
	fmt.Println(len(files), "files at revision", rev)

	write("c.conf", "c")
	os.Remove(filepath.Join(dir, "a.conf"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := errors.New("seen both changes")
	err = src.Watch(ctx, rev, func(e informer.Event[string, file]) error {
		fmt.Println(e.Revision, e.Type, e.Key)
		if e.Revision == rev+2 {
			return seen
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// 2 files at revision 2
	// 3 Put c.conf
	// 4 Delete a.conf
	// seen both changes
}
