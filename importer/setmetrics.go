package importer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// holdCollector exports, at scrape time, when each member that cannot be
// used is withdrawn and whether a disruption stops withdrawals: the
// bounds an operator watches during an outage.
type holdCollector struct {
	set                   *members.Set
	withdrawAt, disrupted *prometheus.Desc
}

func newHoldCollector(set *members.Set) *holdCollector {
	return &holdCollector{
		set: set,
		withdrawAt: prometheus.NewDesc("mcs_importer_member_withdraw_at_timestamp_seconds",
			"When the last known state of a member cluster that cannot be used (unreachable, or not seen since the start) is withdrawn unless it is seen again, in Unix seconds; a disruption moves it on by as long as it lasts, up to --max-disruption. Absent for members that are up or withdrawn.",
			[]string{"cluster", "context"}, nil),
		disrupted: prometheus.NewDesc("mcs_importer_disrupted",
			"1 while more than half the member clusters cannot be reached at once and no member is withdrawn (until it ends or lasts --max-disruption), 0 otherwise.",
			nil, nil),
	}
}

func (c *holdCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.withdrawAt
	ch <- c.disrupted
}

func (c *holdCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.set.Statuses() {
		if !st.WithdrawAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.withdrawAt, prometheus.GaugeValue,
				float64(st.WithdrawAt.UnixMilli())/1e3, st.Cluster, st.Context)
		}
	}
	d := c.set.Disruption()
	v := 0.0
	if d.Active && !d.LimitReached {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(c.disrupted, prometheus.GaugeValue, v)
}
