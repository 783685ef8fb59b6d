//go:build linux

// The demo's tests find leftover processes through /proc, so they are built
// for Linux only (rather than skipped elsewhere at run time).

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// program returns a command that runs this program (the test binary, see
// TestMain) with args, and a token in its environment that every process it
// starts inherits, for finding leftovers.
func program(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := "REPLICASET_TEST_TOKEN=" + hex.EncodeToString(b)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", token)
	return cmd, token
}

// withToken returns the live (not zombie) processes whose environment
// holds token.
func withToken(t *testing.T, token string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte(token+"\x00")) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	report := filepath.Join(t.TempDir(), "report.json")
	cmd, token := program(t, ctx, "demo", "--report", report)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("demo took %v; its output:\n%s%s", time.Since(start), stdout.String(), stderr.String())
	require.NoError(t, err, "the demo failed")

	var rep demoReport
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.True(t, rep.OK)
	var steps []string
	for _, s := range rep.Steps {
		assert.True(t, s.OK, "step %q", s.Name)
		steps = append(steps, s.Name)
	}
	assert.Equal(t, []string{"apply 3 replicas", "kill -9 a process", "delete a pod", "scale to 5", "scale to 2",
		"crash loop", "invalid command", "delete the replicasets"}, steps)
	assert.Positive(t, rep.KillToRestart)
	assert.Less(t, rep.KillToRestart, time.Second, "kill -9 → new process")
	assert.Less(t, rep.KillToStatus, time.Second, "kill -9 → new process in the pod's status")
	assert.Less(t, rep.DeleteToReplacement, 2*time.Second, "pod deleted → replacement running")
	// The back-off doubles from 200ms to the 5s cap. The demo polls the
	// status every 2ms; only a machine too busy to poll for 200ms would miss
	// one, so accept that, but not a wrong sequence.
	want := []string{"200ms", "400ms", "800ms", "1.6s", "3.2s", "5s"}
	if !assert.GreaterOrEqual(t, len(rep.BackOffs), 4) || !assert.Equal(t, "5s", rep.BackOffs[len(rep.BackOffs)-1]) {
		t.FailNow()
	}
	i := 0
	for _, b := range rep.BackOffs {
		for i < len(want) && want[i] != b {
			i++
		}
		require.Less(t, i, len(want), "back-offs %v are not in the order %v", rep.BackOffs, want)
		i++
	}
	if len(rep.BackOffs) != len(want) {
		t.Logf("the demo missed a back-off step: saw %v", rep.BackOffs)
	}
	assert.GreaterOrEqual(t, len(rep.PIDs), 10)
	assert.Empty(t, rep.Leftovers)
	assert.Empty(t, withToken(t, token), "processes left behind by the demo")

	// The timeline: every line starts with the elapsed time.
	line := regexp.MustCompile(`^\[[ \d]{2}\.\d\ds\] `)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, l := range lines {
		assert.Regexp(t, line, l)
	}
	assert.Contains(t, lines[len(lines)-1], "done")
}

// Stopping the program, gently or with SIGKILL, stops every process it
// started. The HTTP API drives it.
func TestRunStopsItsProcesses(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd, token := program(t, ctx, "run", "--addr", "127.0.0.1:0", "--manager-addr", "off", "--log-level", "warn")
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

			first, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err)
			url := regexp.MustCompile(`http://[0-9.:]+`).FindString(first)
			require.NotEmpty(t, url, first)

			req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/replicasets/web",
				strings.NewReader(`{"replicas": 3, "command": ["replicaset", "worker"]}`))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)

			var pids []int
			require.Eventually(t, func() bool {
				var v rsView
				if err := getJSON(ctx, url+"/replicasets/web", &v); err != nil {
					return false
				}
				pids = pids[:0]
				for _, p := range v.Pods {
					if p.Ready() && alive(p.Status.PID) {
						pids = append(pids, p.Status.PID)
					}
				}
				return v.Status.ReadyReplicas == 3 && len(pids) == 3
			}, 20*time.Second, 10*time.Millisecond)
			require.Len(t, withToken(t, token), 4, "the program and its 3 workers")

			require.NoError(t, cmd.Process.Signal(sig))
			err = cmd.Wait()
			if sig == syscall.SIGTERM {
				assert.NoError(t, err, "a SIGTERM is a clean stop")
			}
			assert.Eventually(t, func() bool { return len(withToken(t, token)) == 0 }, 5*time.Second, 10*time.Millisecond,
				"workers %v outlived the program", pids)
		})
	}
}

func getJSON(ctx context.Context, url string, v any) error {
	b, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
