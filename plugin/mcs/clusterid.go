package mcs

import (
	"context"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// Which cluster is "local": cluster_id, else the About API (KEP-2149)
// ClusterProperty cluster.clusterset.k8s.io of the watched cluster, read
// once at start-up. KEP-2149 makes the ID immutable while the cluster is
// a member of its clusterset, so it is not watched: a change takes effect
// when the stanza's informers start again (a restart, or a reload that
// changes the stanza).

// clusterIDWait bounds the ClusterProperty read at start-up.
const clusterIDWait = 5 * time.Second

// learnClusterID sets the cluster ID of the builder's shaping from the
// ClusterProperty when no cluster_id was given and some answers could be
// local-first. It runs before the informers start, so every build sees
// it. Without one (no About API, no such property, no permission, a
// value that is not a cluster ID) no endpoint is local: answers as with
// locality none, logged once.
func (c *controller) learnClusterID(ctx context.Context) {
	sh := c.acfg.Shaping
	if sh == nil || sh.ClusterID != "" || sh.Locality == answers.LocalityNone {
		return
	}
	id, err := readClusterID(ctx, c.rest)
	if err != nil {
		logf := log.Infof // only imports with a trafficDistribution would be local-first
		if sh.Locality == answers.LocalityLocalFirst {
			logf = log.Warningf
		}
		logf("no cluster ID, so no answer is local-first (set cluster_id, or create the ClusterProperty %s): %v", mcsapi.ClusterIDProperty, err)
		return
	}
	next := *sh
	next.ClusterID = id
	c.acfg.Shaping = &next
	log.Infof("cluster ID %q (ClusterProperty %s)", id, mcsapi.ClusterIDProperty)
}

// readClusterID reads the cluster ID (memberconn.ReadValidClusterID: no
// fallback, and a value that is not a cluster ID is none), within
// clusterIDWait.
func readClusterID(ctx context.Context, cfg *rest.Config) (string, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterIDWait)
	defer cancel()
	return memberconn.ReadValidClusterID(ctx, dc)
}
