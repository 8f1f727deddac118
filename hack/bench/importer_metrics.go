package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// waitImporterQuiet polls the importer's metrics until its queue is empty
// and mcs_importer_writes_total has not moved for quiet (or limit passes).
// It returns when the counter last moved and its value then.
func waitImporterQuiet(ctx context.Context, url string, quiet, limit time.Duration) (time.Time, int64, error) {
	deadline := time.Now().Add(limit)
	var last time.Time
	prev := int64(-1)
	for {
		writes, depth, err := importerCounters(ctx, url)
		if err != nil {
			return last, prev, err
		}
		now := time.Now()
		if writes != prev {
			prev, last = writes, now
		}
		if depth == 0 && now.Sub(last) >= quiet {
			return last, prev, nil
		}
		if now.After(deadline) {
			return last, prev, fmt.Errorf("the importer was still writing (or its queue not empty) after %s", limit)
		}
		if err := waitCtx(ctx, 100*time.Millisecond); err != nil {
			return last, prev, err
		}
	}
}

// importerCounters reads the sum of mcs_importer_writes_total and
// mcs_importer_queue_depth from the importer's /metrics.
func importerCounters(ctx context.Context, url string) (writes int64, depth float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexByte(line, '}'); i > 0 && strings.HasPrefix(name, "mcs_importer_writes_total{") {
			rest = strings.TrimSpace(line[i+1:])
			name = "mcs_importer_writes_total"
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, perr := strconv.ParseFloat(fields[0], 64)
		switch name {
		case "mcs_importer_writes_total":
			if perr == nil {
				writes += int64(v)
			}
		case "mcs_importer_queue_depth":
			if perr == nil {
				depth = v
			}
		}
	}
	return writes, depth, sc.Err()
}

// writeCounts sums apiserver_request_total of the write verbs per
// cluster/resource.
func writeCounts(ctx context.Context, set *cluster.Set) (map[string]int64, error) {
	out := map[string]int64{}
	err := apiMetric(ctx, set, "apiserver_request_total", func(c *cluster.Cluster, labels string, v float64) {
		switch label(labels, "verb") {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION":
		default:
			return
		}
		key := c.Name + "/" + label(labels, "resource")
		if sub := label(labels, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += int64(v)
	})
	return out, err
}

// apiMetric calls f with the labels and value of every sample of metric
// name that each cluster's API server exports on /metrics.
func apiMetric(ctx context.Context, set *cluster.Set, name string, f func(c *cluster.Cluster, labels string, v float64)) error {
	for _, c := range set.Clusters {
		raw, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<16), 1<<22)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			end := strings.LastIndexByte(line, '}')
			v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
			if err == nil {
				f(c, line[len(name)+1:end], v)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
}

func label(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// histogram is a Prometheus histogram summed over its label sets:
// cumulative counts by upper bound, ascending.
type histogram struct {
	upper []float64
	count []float64
	total float64 // all observations, those past the last bound too
}

// importerHistogram reads histogram name (summed over its labels) from
// the importer's /metrics.
func importerHistogram(ctx context.Context, url, name string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return histogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return histogram{}, err
	}
	f, ok := fams[name]
	if !ok {
		return histogram{}, fmt.Errorf("no %s", name)
	}
	sum := map[float64]float64{}
	var h histogram
	for _, m := range f.Metric {
		h.total += float64(m.GetHistogram().GetSampleCount())
		for _, b := range m.GetHistogram().GetBucket() {
			sum[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for ub := range sum {
		h.upper = append(h.upper, ub)
	}
	slices.Sort(h.upper)
	for _, ub := range h.upper {
		h.count = append(h.count, sum[ub])
	}
	return h, nil
}

// since is h less what before counted (the same buckets).
func (h histogram) since(before histogram) histogram {
	out := histogram{upper: h.upper, count: slices.Clone(h.count), total: h.total - before.total}
	for i := range out.count {
		if i < len(before.count) && before.upper[i] == h.upper[i] {
			out.count[i] -= before.count[i]
		}
	}
	return out
}

// quantileBound is the upper bound of the bucket holding quantile q (the
// histogram tells no more than that): -1 past the last bound, 0 when
// nothing was counted.
func (h histogram) quantileBound(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	for i, c := range h.count {
		if c >= q*h.total && !math.IsInf(h.upper[i], 1) {
			return h.upper[i]
		}
	}
	return -1
}
