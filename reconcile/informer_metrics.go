package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// informerMetrics is one informer's collector: each scrape reads its
// counters, and its store head as the Manager keeps it (asked at most once
// a second, waited for at most headTimeout), so a scrape costs no more
// than a page load. The informer label is a constant label, so that
// Managers can share a registry as long as their informers' names differ.
//
// client-go's reflector metrics (reflector_lists_total, …) are off by
// default upstream and controller-runtime has none, so no dashboard
// expects names here: they follow those reflector names, under
// converge_informer_.
type informerMetrics struct {
	m *Manager
	h *informerHealth

	synced, size, lastRev, head, lag, lastEventAge, stuck, stalled *prometheus.Desc
	lists, relists, listErrors, watchErrors, decodeErrors, events  *prometheus.Desc
	badKeys                                                        *prometheus.Desc
}

func newInformerMetrics(m *Manager, h *informerHealth) *informerMetrics {
	labels := prometheus.Labels{"informer": h.c.Name()}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, labels)
	}
	return &informerMetrics{
		m: m, h: h,
		synced: d("converge_informer_synced", "Whether the informer has delivered its first full list (1) or not (0)"),
		size:   d("converge_informer_cache_size", "Number of keys in the informer's cache"),
		lastRev: d("converge_informer_last_revision",
			"The highest store revision the informer has seen (its last list's, event's or bookmark's)"),
		head: d("converge_informer_head_revision",
			"The store's current revision, as last told by the informer's Source (absent if it tells none)"),
		lag: d("converge_informer_lag_revisions",
			"How many revisions the informer is behind the store's head (absent if the Source tells no head)"),
		lastEventAge: d("converge_informer_last_event_age_seconds",
			"Seconds since the informer last applied a watch event or bookmark that moved its revision (absent before the first)"),
		stuck: d("converge_informer_stuck",
			"Whether the informer's revision has stood still behind the store's head for ManagerOptions.StuckAfter (1) or not (0); /readyz fails meanwhile"),
		stalled: d("converge_informer_stalled_seconds",
			"Seconds the informer's revision has stood still behind the store's head (0 when it is level or moving)"),
		lists: d("converge_informer_lists_total", "Total number of successful lists of the informer's Source"),
		relists: d("converge_informer_relists_total",
			"Total number of watches that found their revision expired (compacted), each followed by a relist"),
		listErrors: d("converge_informer_list_errors_total", "Total number of failed lists"),
		watchErrors: d("converge_informer_watch_errors_total",
			"Total number of watches that failed other than by an expired revision"),
		decodeErrors: d("converge_informer_decode_errors_total",
			"Total number of values the informer could not take (not decoded, or the transform panicked); each makes its key bad"),
		events:  d("converge_informer_events_total", "Total number of watch events applied"),
		badKeys: d("converge_informer_bad_keys", "Number of keys whose latest value could not be taken (see informer.BadKey)"),
	}
}

// metricsRegisterer is where informer metrics go: ManagerOptions.Registerer,
// or the Gatherer if it is also a Registerer; nil for none.
func (m *Manager) metricsRegisterer() prometheus.Registerer {
	if m.opts.Registerer != nil {
		return m.opts.Registerer
	}
	reg, _ := m.opts.Gatherer.(prometheus.Registerer)
	return reg
}

// registerInformerMetrics registers the collector of h's informer, if the
// Manager has a registerer.
func (m *Manager) registerInformerMetrics(h *informerHealth) (unregister func(), err error) {
	reg := m.metricsRegisterer()
	if reg == nil {
		return func() {}, nil
	}
	c := h.c
	im := newInformerMetrics(m, h)
	if err := reg.Register(im); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			return nil, fmt.Errorf("informer %q: the Registerer has metrics for an informer of this name already (another Manager's?): "+
				"informer names must be unique per registry", c.Name())
		}
		return nil, fmt.Errorf("informer %q: metrics: %w", c.Name(), err)
	}
	return func() { reg.Unregister(im) }, nil
}

// Describe implements prometheus.Collector.
func (im *informerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{im.synced, im.size, im.lastRev, im.head, im.lag, im.lastEventAge, im.stuck, im.stalled,
		im.lists, im.relists, im.listErrors, im.watchErrors, im.decodeErrors, im.events, im.badKeys} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (im *informerMetrics) Collect(ch chan<- prometheus.Metric) {
	now := im.m.opts.Clock.Now()
	for _, v := range im.m.viewsOf(context.Background(), []*informerHealth{im.h}) {
		gauge := func(d *prometheus.Desc, x float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x)
		}
		counter := func(d *prometheus.Desc, x uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(x))
		}
		gauge(im.synced, boolFloat(v.Synced))
		if !v.HasStats {
			continue
		}
		gauge(im.size, float64(v.Len))
		gauge(im.lastRev, float64(v.LastRevision))
		if v.HeadKnown {
			gauge(im.head, float64(v.Head))
			gauge(im.lag, float64(v.Lag))
		}
		if t := v.Stats.LastEvent; !t.IsZero() {
			gauge(im.lastEventAge, max(now.Sub(t).Seconds(), 0))
		}
		gauge(im.stuck, boolFloat(v.Stuck))
		gauge(im.stalled, v.StalledFor.Seconds())
		counter(im.lists, v.Stats.Lists)
		counter(im.relists, v.Stats.Expired)
		counter(im.listErrors, v.Stats.ListErrors)
		counter(im.watchErrors, v.Stats.WatchErrors)
		counter(im.decodeErrors, v.Stats.DecodeErrors)
		counter(im.events, v.Stats.Events)
		gauge(im.badKeys, float64(v.Stats.BadKeys))
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
