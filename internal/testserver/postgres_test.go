package testserver

import (
	"net"
	"net/url"
	"testing"
	"time"
)

// TestPostgresKillStart kills the shared server and starts it again: it must
// not run in parallel with other tests of this package that use it.
func TestPostgresKillStart(t *testing.T) {
	m := PostgresServer(t)
	u, err := url.Parse(Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	dial := func() error {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if !m.Running() {
		t.Fatal("server not running")
	}
	if err := dial(); err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	m.Kill(t)
	if m.Running() {
		t.Fatal("running after Kill")
	}
	if err := dial(); err == nil {
		t.Fatalf("dial %s succeeded after Kill", u.Host)
	}
	start := time.Now()
	m.Start(t)
	t.Logf("restart took %v", time.Since(start))
	if !m.Running() {
		t.Fatal("not running after Start")
	}
	if err := dial(); err != nil {
		t.Fatalf("dial %s after Start: %v", u.Host, err)
	}
}
