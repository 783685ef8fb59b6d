// Command report runs the benchmarks of package bench and prints a markdown
// table of the median of each metric for converge, client-go's workqueue and
// controller-runtime's priority queue (scenarios 1-6), converge's informer
// and client-go's SharedIndexInformer (scenarios 7-9), the ratios, and
// whether each target is met.
//
//	make bench                             # from the repository root
//	go -C bench run ./report               # the same: BENCH_COUNT=3 runs per benchmark
//	BENCH_COUNT=1 go -C bench run ./report
//	BENCH_SKIP=- go -C bench run ./report   # the sharding benchmarks too (skipped by default)
//	go -C bench run ./report -from out/bench.txt   # redo table and charts from a saved run
//
// It runs in the bench module (bench/go.mod), which holds the benchmarks'
// dependencies (client-go, controller-runtime) so that the library's go.mod
// does not. The go test output streams to stderr while it runs and is saved
// in bench/out/bench.txt; the report goes to stdout and to
// bench/out/queue.md; the machine, date and table go between the markers
// <!-- bench:begin --> and <!-- bench:end --> of docs/benchmarks.md
// (doctable.go); a few of its rows, with the date and machine, go between
// <!-- bench:headline:begin --> and <!-- bench:headline:end --> of the
// README (headline.go); the charts of the medians (gonum.org/v1/plot) go to
// docs/images/bench-*.svg.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run() error {
	from := flag.String("from", "", "parse this saved go test -bench output (e.g. out/bench.txt) instead of running the benchmarks")
	flag.Parse()
	count := os.Getenv("BENCH_COUNT")
	if count == "" {
		count = "3"
	}
	if n, err := strconv.Atoi(count); err != nil || n < 1 {
		return fmt.Errorf("BENCH_COUNT=%q: want a positive integer", count)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	// The sharding benchmarks (scaling, rebalance and memory
	// figures) take longer than everything else together and feed no
	// side-by-side row: they run on their own (docs/design/sharding.md)
	// unless BENCH_SKIP says otherwise ("-" skips nothing).
	skip := os.Getenv("BENCH_SKIP")
	switch skip {
	case "":
		skip = "^BenchmarkSharded"
	case "-":
		skip = ""
	}
	// go test's default timeout of 10 minutes would end a run of five
	// repetitions part way; a hung benchmark still ends at the timeout.
	args := []string{"test", "-run", "^$", "-bench", ".", "-skip", skip, "-benchtime=1x", "-count=" + count, "-timeout=3h", "."}
	command := "go " + strings.Join(quote(args), " ")
	dir := filepath.Join(root, "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	var out []byte
	var took time.Duration
	var runErr error
	if *from != "" {
		if out, err = os.ReadFile(*from); err != nil {
			return err
		}
		command = "(saved) " + *from
	} else {
		out, took, runErr = runBenchmarks(root, args, command)
		saved := append([]byte(savedHeader(command, took, time.Now())), out...)
		if err := os.WriteFile(filepath.Join(dir, "bench.txt"), saved, 0o644); err != nil {
			return err
		}
	}

	res, err := Parse(bytes.NewReader(out))
	if err != nil {
		return err
	}
	if len(res.Order) == 0 {
		return fmt.Errorf("%s: no benchmark results (%v)", command, runErr)
	}
	ran := time.Now()
	if *from != "" {
		count = strconv.Itoa(res.Runs())
		command, took, ran = savedRun(res, *from)
	}
	report := render(res, command, count, took, runErr, ran)
	fmt.Print(report)

	path := filepath.Join(dir, "queue.md")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "report: written to", path)
	written, err := writeTable(root, renderBody(res, command, count, took, runErr, ran))
	for _, w := range written {
		fmt.Fprintln(os.Stderr, "report: table written to", w)
	}
	if err != nil {
		return err
	}
	written, err = writeHeadline(root, headline(res, count, ran))
	for _, w := range written {
		fmt.Fprintln(os.Stderr, "report: headline table written to", w)
	}
	if err != nil {
		return err
	}
	charts, err := writeCharts(res, filepath.Join(root, chartsDir))
	for _, c := range charts {
		fmt.Fprintln(os.Stderr, "report: chart written to", c)
	}
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	if runErr != nil {
		return fmt.Errorf("%s: %v", command, runErr)
	}
	return nil
}

// runBenchmarks runs go with args in root, streaming its output to stderr,
// and returns the output, how long it took, and its error.
func runBenchmarks(root string, args []string, command string) ([]byte, time.Duration, error) {
	fmt.Fprintf(os.Stderr, "report: running %s in %s\n", command, root)
	var out bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stdout = io.MultiWriter(os.Stderr, &out)
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	return out.Bytes(), time.Since(start).Round(time.Second), err
}

// render is the report make bench prints: a title, then renderBody.
func render(res *Results, command, count string, took time.Duration, runErr error, ran time.Time) string {
	return "# Benchmarks: converge vs client-go (workqueue, SharedIndexInformer, controller loop) vs controller-runtime (priority queue, controller)\n\n" +
		renderBody(res, command, count, took, runErr, ran)
}

// renderBody is the machine, the command, the date and the table: what
// writeTable puts in the documentation.
func renderBody(res *Results, command, count string, took time.Duration, runErr error, ran time.Time) string {
	var b strings.Builder
	cpu, procs := res.machine()
	table, met, total := res.Table()
	fmt.Fprintf(&b, "- go: %s\n", goVersion())
	fmt.Fprintf(&b, "- GOMAXPROCS: %d\n", procs)
	fmt.Fprintf(&b, "- CPU: %s (%d logical CPUs)\n", cpu, runtime.NumCPU())
	fmt.Fprintf(&b, "- command: `%s` (took %v)\n", command, took)
	fmt.Fprintf(&b, "- values: median of %s run(s) per benchmark; ratios are converge ÷ the other implementation, from one run on one machine\n", count)
	fmt.Fprintf(&b, "- date: %s\n", ran.UTC().Format(time.RFC3339))
	if note := res.Header[headerNote]; note != "" {
		fmt.Fprintf(&b, "- note: %s\n", note)
	}
	fmt.Fprintf(&b, "- Source: the last column names what fed converge's side of each row; client-go and controller-runtime are fed the same objects by an in-memory fake ListWatch (no decoding), unless the row says otherwise\n\n")
	b.WriteString(table)
	fmt.Fprintf(&b, "\nTargets met: %d of %d.\n", met, total)
	if runErr != nil {
		fmt.Fprintf(&b, "\n**The benchmark run failed (%v); the table holds what completed.**\n", runErr)
	}
	return b.String()
}

// benchModule is the bench module's path: the benchmarks run in it, not in
// the library's module.
const benchModule = "github.com/converge-go/converge/bench"

// moduleRoot is the directory of the bench module's go.mod, found from the
// working directory (go -C bench run ./report, or make bench, run there).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.GoMod}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w (run from the bench module: make bench, or go -C bench run ./report)", err)
	}
	path, gomod, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if path != benchModule {
		return "", fmt.Errorf("the current module is %q, not %s: run make bench, or go -C bench run ./report", path, benchModule)
	}
	return filepath.Dir(gomod), nil
}

func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

// machine is the CPU model and GOMAXPROCS of the run res holds, as go
// test printed them, or else this machine's.
func (res *Results) machine() (cpu string, procs int) {
	cpu, procs = res.Header["cpu"], res.Procs
	if cpu == "" {
		cpu = cpuModel()
	}
	if procs == 0 {
		procs = runtime.GOMAXPROCS(0)
	}
	return cpu, procs
}

// cpuModel reads the model name from /proc/cpuinfo (Linux).
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// quote shell-quotes the arguments that need it, so the printed command can
// be pasted.
func quote(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$*?[] '\"|&;<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return q
}
