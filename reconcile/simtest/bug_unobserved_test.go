package simtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/simtest"
)

// The owner-by-name sample: owners with a UID (a deleted and recreated
// owner has a new one) and the pods made for them.
type (
	Owner struct{ UID, Replicas int }
	Pod   struct {
		Owner    string
		OwnerUID int
	}
)

type fleet struct {
	owners *memstore.Store[string, Owner]
	pods   *memstore.Store[string, Pod]
}

// podMaker keeps Replicas pods per owner and deletes an owner's pods when
// it is gone. byName is the planted bug: a pod belongs to whatever owner
// has its owner's name, so when the owner is deleted and recreated before
// the controller sees the delete (coalesced), the old owner's pods are
// adopted by the new one. The corrected version also compares the UID: a
// pod of another UID is an orphan.
type podMaker struct {
	owners informer.Store[string, Owner]
	pods   informer.Store[string, Pod]
	oInf   *informer.Informer[string, Owner]
	pInf   *informer.Informer[string, Pod]
	byName bool
}

func (c *podMaker) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	own, ok := c.oInf.Get(key)
	have := 0
	for _, e := range reconcile.Owned(c.pInf, key) {
		if ok && (c.byName || e.Value.OwnerUID == own.UID) {
			have++
			continue
		}
		if _, err := c.pods.Delete(ctx, e.Key, 0); err != nil {
			return reconcile.Result{}, err
		}
	}
	if ok && have < own.Replicas {
		// Named by owner UID: the same name in every run and process.
		rev, err := c.pods.Create(ctx, key+"-"+itoa(own.UID), Pod{Owner: key, OwnerUID: own.UID})
		if err != nil {
			return reconcile.Result{}, err
		}
		reconcile.Wrote(ctx, c.pInf, rev)
	}
	return reconcile.Result{}, nil
}

func fleetSpec(byName bool) simtest.Spec[*fleet] {
	return simtest.Spec[*fleet]{
		World: func() *fleet {
			return &fleet{owners: must.Do(memstore.New[string, Owner]()), pods: must.Do(memstore.New[string, Pod]())}
		},
		Process: func(p *simtest.Process, w *fleet) error {
			c := &podMaker{byName: byName, owners: simtest.Wrap(p, "owners", w.owners), pods: simtest.Wrap(p, "pods", w.pods)}
			c.oInf = must.Do(informer.New("owners", c.owners, informer.WithLogger(p.Logger())))
			c.pInf = must.Do(informer.New("pods", c.pods, informer.WithLogger(p.Logger())))
			ctrl, err := reconcile.New("owners", simtest.Count(p, "owners", reconcile.Reconciler[string](c)),
				reconcile.For(c.oInf),
				reconcile.Owns(c.pInf, func(_ string, pod Pod) (string, bool) { return pod.Owner, true }),
				reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Go("owners informer", c.oInf.Run)
			p.Go("pods informer", c.pInf.Run)
			p.Add(ctrl)
			return nil
		},
		// Owner a, a while later deleted, then recreated (a new UID).
		Workload: []func(context.Context, *fleet) error{
			func(_ context.Context, w *fleet) error { w.owners.Put("a", Owner{UID: 1, Replicas: 1}); return nil },
			pause[*fleet],
			func(ctx context.Context, w *fleet) error { _, err := w.owners.Delete(ctx, "a", 0); return err },
			func(_ context.Context, w *fleet) error { w.owners.Put("a", Owner{UID: 2, Replicas: 1}); return nil },
		},
		// The owner UIDs each owner's pods point to.
		Observe: func(w *fleet) any {
			got := map[string][]int{}
			es, _, _ := w.pods.List(context.Background())
			for _, e := range es {
				got[e.Value.Owner] = append(got[e.Value.Owner], e.Value.OwnerUID)
			}
			return got
		},
		Mode: simtest.Sampled,
		Seed: 1,
	}
}

func TestAControllerThatFindsItsPodsByOwnerNameShouldBeFoundByCoalescingARecreate(t *testing.T) {
	spec := fleetSpec(true)
	spec.Runs = 40
	r := findsBug(t, spec, 20, "differential")
	assert.Contains(t, r.Failed.String(), "coalesce=", "shrunk to coalescing")
	assert.Empty(t, r.Failed.Faults, "no write fault needed")
}

func TestAControllerThatMatchesOwnerUIDsShouldSurviveSampledSchedules(t *testing.T) {
	passes(t, fleetSpec(false))
}

// The transient-status sample: a job fails, and is retried at once; a
// watcher keeps one alert per job, counting the failures it alerted on.
type (
	Job struct {
		Phase    string
		Failures int
	}
	Alert struct{ Failures int }
)

type jobs struct {
	jobs   *memstore.Store[string, Job]
	alerts *memstore.Store[string, Alert]
}

// alerter raises an alert for each failure of a job. onEdge is the planted
// bug: it alerts when it sees the job in phase Failed, a state the retry
// overwrites at once, so when the two writes are coalesced the failure is
// never alerted. The corrected version acts on the level, the failure
// count, which never goes back.
type alerter struct {
	jobs   *informer.Informer[string, Job]
	alerts informer.Store[string, Alert]
	onEdge bool
}

func (a *alerter) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	job, ok := a.jobs.Get(key)
	if !ok || (a.onEdge && job.Phase != "Failed") {
		return reconcile.Result{}, nil
	}
	_, _, err := informer.CreateOrUpdate(ctx, a.alerts, key, func(al *Alert) error {
		al.Failures = max(al.Failures, job.Failures)
		return nil
	})
	return reconcile.Result{}, err
}

func jobsSpec(onEdge bool) simtest.Spec[*jobs] {
	return simtest.Spec[*jobs]{
		World: func() *jobs {
			return &jobs{jobs: must.Do(memstore.New[string, Job]()), alerts: must.Do(memstore.New[string, Alert]())}
		},
		Process: func(p *simtest.Process, w *jobs) error {
			a := &alerter{onEdge: onEdge, alerts: simtest.Wrap(p, "alerts", w.alerts)}
			a.jobs = must.Do(informer.New("jobs", simtest.Wrap(p, "jobs", w.jobs), informer.WithLogger(p.Logger())))
			ctrl, err := reconcile.New("jobs", simtest.Count(p, "jobs", reconcile.Reconciler[string](a)),
				reconcile.For(a.jobs), reconcile.WithWorkers(1), reconcile.WithLogger(p.Logger()))
			if err != nil {
				return err
			}
			p.Go("jobs informer", a.jobs.Run)
			p.Add(ctrl)
			return nil
		},
		// A job runs, a while later fails, and is retried.
		Workload: []func(context.Context, *jobs) error{
			func(_ context.Context, w *jobs) error { w.jobs.Put("j", Job{Phase: "Running"}); return nil },
			pause[*jobs],
			func(_ context.Context, w *jobs) error { w.jobs.Put("j", Job{Phase: "Failed", Failures: 1}); return nil },
			func(_ context.Context, w *jobs) error {
				w.jobs.Put("j", Job{Phase: "Running", Failures: 1})
				return nil
			},
		},
		Observe: func(w *jobs) any {
			a, _, _, _ := w.alerts.Get(context.Background(), "j")
			return a.Failures
		},
		Mode: simtest.Sampled,
		Seed: 1,
	}
}

func TestAControllerThatActsOnATransientStatusShouldBeFoundByCoalescing(t *testing.T) {
	spec := jobsSpec(true)
	spec.Runs = 40
	r := findsBug(t, spec, 20, "differential")
	assert.Contains(t, r.Failed.String(), "coalesce=", "shrunk to coalescing")
}

func TestAControllerThatActsOnTheFailureCountShouldSurviveSampledSchedules(t *testing.T) {
	passes(t, jobsSpec(false))
}

func itoa(i int) string { return string(rune('0' + i)) }

// pause is a workload step that lets a minute of virtual time pass, more
// than any coalescing window: the system runs meanwhile, so the steps
// before it are seen apart from the ones after.
func pause[W any](context.Context, W) error { time.Sleep(time.Minute); return nil }
