package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/converge-go/converge/events"
	"github.com/converge-go/converge/examples/cluster/api"
	"github.com/converge-go/converge/examples/cluster/apiserver"
	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/httpstore"
	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/reconcile"
)

// upConfig is up's command line.
type upConfig struct {
	store, timings, listen string
	token, readToken       string
	managerAddr, logLevel  string
	lock, identity         string
	// onListen, if set, is called with the API's URL once it listens
	// (the demo's and the tests' way to find a port 0).
	onListen func(url string)
	// wrap, if set, wraps the opened stores before the API and the
	// controllers use them (measure counts the writes and watch events
	// through it).
	wrap func(api.Stores) api.Stores
	// wrapAPI, if set, wraps the API's handler (measure counts the watch
	// events sent to the agents and the CLI through it).
	wrapAPI func(http.Handler) http.Handler
}

func upMode(args []string, stdout, stderr io.Writer) int {
	var cfg upConfig
	fl := flag.NewFlagSet("up", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&cfg.store, "store", "mem", "where the cluster's state lives: mem, etcd://host:port[,host:port], postgres://user@host:port/db or sqlite://FILE")
	fl.StringVar(&cfg.timings, "timings", "fast", "fast (a demo's minute) or kube (Kubernetes' defaults)")
	fl.StringVar(&cfg.listen, "listen", "127.0.0.1:6443", "address of the API (port 0 picks one)")
	fl.StringVar(&cfg.token, "token", "", "bearer token that may read and write (agents, ctl); empty: no authentication")
	fl.StringVar(&cfg.readToken, "read-only-token", "", "bearer token that may only read")
	fl.StringVar(&cfg.managerAddr, "manager-addr", "off", `the Manager's /healthz, /readyz, /metrics and /debug/converge/ ("off": none)`)
	fl.StringVar(&cfg.logLevel, "log-level", "info", "logs on stderr: debug, info, warn, error or none")
	fl.StringVar(&cfg.lock, "lock", "", "run active/standby with the other up processes of this lock name, through the store (etcd or PostgreSQL), the controllers' writes fenced by the leader's term; empty: always active")
	fl.StringVar(&cfg.identity, "id", "", "with --lock: this process's name in the lock (default: host name and pid)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := up(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "cluster up: %v\n", err)
		return 1
	}
	return 0
}

// parseTimings returns the timings --timings names.
func parseTimings(name string) (api.Timings, error) {
	switch name {
	case "fast":
		return api.FastTimings(), nil
	case "kube":
		return api.KubeTimings(), nil
	}
	return api.Timings{}, fmt.Errorf("--timings %q: want fast or kube", name)
}

// up runs the control plane until ctx is done.
func up(ctx context.Context, cfg upConfig, stdout, stderr io.Writer) error {
	logger, err := newLogger(cfg.logLevel, stderr)
	if err != nil {
		return err
	}
	timings, err := parseTimings(cfg.timings)
	if err != nil {
		return err
	}
	tokens := map[string]httpstore.Access{}
	if cfg.token != "" {
		tokens[cfg.token] = httpstore.ReadWrite
	}
	if cfg.readToken != "" {
		if cfg.token == "" {
			return errors.New("--read-only-token needs --token: without it every request may write")
		}
		tokens[cfg.readToken] = httpstore.ReadOnly
	}
	st, err := openStores(cfg.store, cfg.lock)
	if err != nil {
		return err
	}
	defer st.close()
	if cfg.wrap != nil {
		st.Stores = cfg.wrap(st.Stores)
	}
	clk := clock.RealClock{}
	srv, err := apiserver.New(st.Stores, apiserver.Options{Tokens: tokens, TolerationSeconds: timings.DefaultTolerationSeconds, Clock: clk})
	if err != nil {
		return err
	}
	stores := srv.Stores()
	var handler http.Handler = srv
	if cfg.wrapAPI != nil {
		handler = cfg.wrapAPI(srv)
	}

	mopts := reconcile.ManagerOptions{Addr: cfg.managerAddr, Logger: logger, ShutdownTimeout: 20 * time.Second}
	if err := withLock(&mopts, st, cfg); err != nil {
		return err
	}
	mgr, err := reconcile.NewManager(mopts)
	if err != nil {
		return err
	}
	sink, err := events.NewStoreSink(stores.Events, events.WithPrefix(EventPrefixControlPlane))
	if err != nil {
		return err
	}
	informers, err := api.NewInformers(stores, informer.WithLogger(logger))
	if err != nil {
		return err
	}
	c := &api.Cluster{
		Stores:    stores,
		Informers: informers,
		Timings:   timings,
		Clock:     clk,
		Recorder: func(component string) *events.Recorder {
			rec, err := events.NewRecorder(component, events.WithSink(sink), events.WithClock(clk))
			if err != nil {
				panic(err) // a component's name and the options above are fixed in this file
			}
			return rec
		},
		Logger: logger,
	}
	for _, ctrl := range controllers {
		if err := ctrl.add(mgr, c); err != nil {
			return fmt.Errorf("controller %s: %w", ctrl.name, err)
		}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	if cfg.lock != "" {
		// Say when this process starts leading: the other up processes of
		// the lock stand by meanwhile, serving the API only.
		err := mgr.AddLeaderFunc("announce", func(ctx context.Context) error {
			term, _ := leader.TermFromContext(ctx)
			fmt.Fprintf(stdout, "cluster: %s leads the control plane (term %d)\n", mopts.Leader.Identity, term)
			<-ctx.Done()
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, err := range []error{
		mgr.AddFunc("events", func(ctx context.Context) error { return runSink(ctx, sink) }),
		mgr.AddFunc("api", func(ctx context.Context) error { return serve(ctx, ln, handler) }),
	} {
		if err != nil {
			_ = ln.Close()
			return err
		}
	}
	standby := ""
	if cfg.lock != "" {
		standby = ", active/standby on lock " + cfg.lock
	}
	fmt.Fprintf(stdout, "cluster: control plane on http://%s (state in %s, %s timings, %d controllers%s)\n",
		ln.Addr(), st.describe, cfg.timings, len(controllers), standby)
	if cfg.onListen != nil {
		cfg.onListen("http://" + ln.Addr().String())
	}
	return mgr.Run(ctx)
}

// EventPrefixControlPlane is where the control plane's events are stored;
// each agent keeps its own under EventPrefixNode, so that each event
// sink's retention prunes only its own records.
const EventPrefixControlPlane = "events/control-plane/"

// runSink writes the events until ctx is done, then what is still
// pending, for up to a second: a shutdown's last events are worth keeping.
func runSink(ctx context.Context, sink *events.StoreSink) error {
	_ = sink.Run(ctx)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = sink.Flush(fctx)
	return nil
}

// serve serves h on ln until ctx is done, then shuts the server down,
// ending the watches.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // the watches do not end by themselves
	}
	<-errc
	return nil
}
