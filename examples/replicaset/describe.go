package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/informer"
)

// describe writes what `kubectl describe replicaset` shows of ReplicaSet
// name, read from st at now: its spec, status and conditions, its pods,
// and the events recorded on it and on its pods (oldest first, a repeated
// one once with its count). It returns informer.ErrNotFound if there is no
// such ReplicaSet.
func describe(ctx context.Context, w io.Writer, st *stores, name string, now time.Time) error {
	rs, _, ok, err := st.replicaSets.Get(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("replicaset %q: %w", name, informer.ErrNotFound)
	}
	pods, err := listPods(ctx, st, name)
	if err != nil {
		return err
	}
	var evs []events.Event
	if st.events != nil {
		if evs, err = describedEvents(ctx, st.events, name, pods); err != nil {
			return err
		}
	}

	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	field("Name", "%s", name)
	field("Command", "%s", strings.Join(rs.Spec.Command, " "))
	field("Replicas", "%d current / %d desired", rs.Status.Replicas, rs.Spec.Replicas)
	phases := map[string]int{}
	for _, p := range pods {
		phases[cmp.Or(p.Status.Phase, PhasePending)]++
	}
	field("Pods Status", "%d Running / %d Waiting / %d Pending / %d Failed",
		phases[PhaseRunning], phases[PhaseWaiting], phases[PhasePending], phases[PhaseFailed])
	field("Generation", "%d (observed %d)", rs.Generation, rs.Status.ObservedGeneration)
	field("Finalizers", "%s", orNone(strings.Join(rs.Finalizers, ", ")))
	if rs.Deleting() {
		field("Deletion", "requested; waiting for its pods to be deleted")
	}
	_ = tw.Flush()

	table(w, "Conditions", []string{"Type", "Status", "Reason", "Message"}, len(rs.Status.Conditions), func(i int) []string {
		c := rs.Status.Conditions[i]
		return []string{c.Type, string(c.Status), c.Reason, c.Message}
	})
	table(w, "Pods", []string{"Name", "Phase", "Reason", "Restarts", "PID", "Age"}, len(pods), func(i int) []string {
		p := pods[i]
		pid := "-"
		if p.Status.PID != 0 {
			pid = fmt.Sprint(p.Status.PID)
		}
		return []string{p.Name, cmp.Or(p.Status.Phase, PhasePending), orNone(p.Status.Reason),
			fmt.Sprint(p.Status.RestartCount), pid, age(now.Sub(p.Spec.CreatedAt))}
	})
	table(w, "Events", []string{"Type", "Reason", "Age", "From", "Message"}, len(evs), func(i int) []string {
		e := evs[i]
		when := age(now.Sub(e.Last))
		if e.Count > 1 {
			when += fmt.Sprintf(" (x%d over %s)", e.Count, age(now.Sub(e.First)))
		}
		msg := e.Message
		if e.Key != name {
			msg = "pod " + e.Key + ": " + msg
		}
		return []string{string(e.Type), e.Reason, when, e.Source, msg}
	})
	return nil
}

// describedEvents returns the events on ReplicaSet name and on its pods,
// the oldest (by last occurrence) first.
func describedEvents(ctx context.Context, st informer.Store[string, events.Event], name string, pods []podView) ([]events.Event, error) {
	entries, _, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	prefixes := []string{rsEventPrefix + name + "/"}
	for _, p := range pods {
		prefixes = append(prefixes, podEventPrefix+p.Name+"/")
	}
	var out []events.Event
	for _, e := range entries {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Key, p) }) {
			out = append(out, e.Value)
		}
	}
	slices.SortFunc(out, func(a, b events.Event) int {
		return cmp.Or(a.Last.Compare(b.Last), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// table writes a titled table, as kubectl describe does: "<none>" if it
// has no rows.
func table(w io.Writer, title string, header []string, n int, row func(int) []string) {
	if n == 0 {
		fmt.Fprintf(w, "%s:\t<none>\n", title)
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := func(cells []string) { fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t")) }
	line(header)
	dashes := make([]string, len(header))
	for i, h := range header {
		dashes[i] = strings.Repeat("-", len(h))
	}
	line(dashes)
	for i := range n {
		line(row(i))
	}
	_ = tw.Flush()
}

func orNone(s string) string { return cmp.Or(s, "<none>") }

// age is a duration as kubectl shows ages: "45s", "3m20s", "12m", "5h10m",
// "3d".
func age(d time.Duration) string {
	d = max(0, d).Truncate(time.Second)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// describeMode is `replicaset describe [--store URL] [--prefix P] [--addr
// A] NAME`: it reads the stores directly, or, for the memory store (which
// lives in the process running the controllers), asks that process's API.
func describeMode(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("describe", flag.ContinueOnError)
	fl.SetOutput(stderr)
	store := fl.String("store", "memory", "where desired state lives, as for run; memory: ask the API at --addr")
	prefix := fl.String("prefix", "/converge-demo/", "etcd key prefix, or PostgreSQL schema, as for run")
	addr := fl.String("addr", "127.0.0.1:8080", "the API of `replicaset run`, for --store memory")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: replicaset describe [--store URL] [--prefix P] [--addr A] NAME")
		return 2
	}
	name := fl.Arg(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if *store == "memory" {
		err = describeRemote(ctx, stdout, *addr, name)
	} else {
		var st *stores
		if st, err = openStores(*store, *prefix); err == nil {
			err = describe(ctx, stdout, st, name, time.Now())
			st.close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "replicaset describe: %v\n", err)
		return 1
	}
	return 0
}

// describeRemote copies the API's describe of name to w.
func describeRemote(ctx context.Context, w io.Writer, addr, name string) error {
	b, err := httpGet(ctx, "http://"+addr+"/replicasets/"+url.PathEscape(name)+"/describe")
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// httpGet returns the body of a 200 answer to a GET of url; any other
// status is an error with the start of the body.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return io.ReadAll(resp.Body)
}
