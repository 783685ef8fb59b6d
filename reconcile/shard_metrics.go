package reconcile

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/leader/shard"
)

// ShardMetrics returns a Prometheus collector that reports s's Status at
// every scrape, for a registry of the caller's (register it once per
// Sharder):
//
//   - converge_shard_buckets{state}: buckets held ("held"), held and being
//     handed over ("releasing"), and wanted but not held yet
//     ("campaigning") by this replica;
//   - converge_shard_members{state}: members this replica counts as live
//     ("live", itself included) and, of those, "suspect";
//   - converge_shard_bucket_epoch{bucket}: the epoch of each bucket held.
//
// Every series carries the label identity. Reading the Status takes the
// Sharder's locks briefly; no metric is kept between scrapes.
func ShardMetrics(s *shard.Sharder) prometheus.Collector {
	labels := prometheus.Labels{"identity": s.Identity()}
	return &shardCollector{
		s:       s,
		buckets: prometheus.NewDesc("converge_shard_buckets", "Buckets of this replica, by state (held, releasing, campaigning)", []string{"state"}, labels),
		members: prometheus.NewDesc("converge_shard_members", "Members this replica sees, by state (live, suspect)", []string{"state"}, labels),
		epoch:   prometheus.NewDesc("converge_shard_bucket_epoch", "Epoch of each bucket this replica holds", []string{"bucket"}, labels),
	}
}

type shardCollector struct {
	s                       *shard.Sharder
	buckets, members, epoch *prometheus.Desc
}

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.buckets
	ch <- c.members
	ch <- c.epoch
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	gauge := func(d *prometheus.Desc, v int, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), label)
	}
	gauge(c.buckets, len(st.Held), "held")
	gauge(c.buckets, len(st.Releasing), "releasing")
	gauge(c.buckets, len(st.Campaigning), "campaigning")
	gauge(c.members, len(st.Members), "live")
	gauge(c.members, len(st.Suspects), "suspect")
	for _, b := range st.Held {
		ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(b.Epoch), strconv.Itoa(b.ID))
	}
}
