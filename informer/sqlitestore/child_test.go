package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// The child's settings, from its environment.
const (
	childEnv    = "SQLITESTORE_CHILD_PATH"   // the file to write
	childPrefix = "SQLITESTORE_CHILD_PREFIX" // its keys' prefix
	childSync   = "SQLITESTORE_CHILD_SYNC"   // Options.Synchronous
	childWrites = "SQLITESTORE_CHILD_WRITES" // how many rounds (0: until killed)
)

// counterKey is the key every child increments with compare-and-swap.
const counterKey = "counter"

// runChild writes rounds of a Create of prefix-i and an increment of the
// shared counter, printing "ack KEY REV" after each write returned, so
// that the parent knows what was acknowledged.
func runChild() int {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, os.Getenv(childEnv), sqlitestore.Options{Synchronous: sqlitestore.Synchronous(os.Getenv(childSync))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() { _ = db.Close() }()
	s := must.Do(sqlitestore.New[item](db, "items"))
	prefix := os.Getenv(childPrefix)
	rounds, _ := strconv.Atoi(os.Getenv(childWrites))
	for i := 0; rounds == 0 || i < rounds; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		rev, err := s.Create(ctx, key, item{N: i, S: prefix})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("ack %s %d\n", key, rev)
		rev, err = increment(ctx, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("ack %s %d\n", counterKey, rev)
	}
	return 0
}

// increment adds 1 to the counter's N with compare-and-swap, retrying on
// a conflict.
func increment(ctx context.Context, s *sqlitestore.Store[item]) (informer.Revision, error) {
	for {
		v, rev, ok, err := s.Get(ctx, counterKey)
		if err != nil {
			return 0, err
		}
		v.N++
		if ok {
			rev, err = s.Update(ctx, counterKey, v, rev)
		} else {
			rev, err = s.Create(ctx, counterKey, v)
		}
		if !errors.Is(err, informer.ErrConflict) {
			return rev, err
		}
	}
}

// child is a running writer child and the acknowledgements read from it.
type child struct {
	cmd  *exec.Cmd
	out  io.ReadCloser
	acks chan ack
}

type ack struct {
	key string
	rev informer.Revision
}

// startChild re-executes the test binary as a writer of path.
func startChild(t *testing.T, path, prefix string, sync sqlitestore.Synchronous, rounds int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path, childPrefix+"="+prefix,
		childSync+"="+string(sync), childWrites+"="+strconv.Itoa(rounds))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, out: out, acks: make(chan ack, 1024)}
	go func() {
		defer close(c.acks)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			rev, err := strconv.ParseUint(f[2], 10, 64)
			if err == nil {
				c.acks <- ack{key: f[1], rev: informer.Revision(rev)}
			}
		}
	}()
	return c
}
