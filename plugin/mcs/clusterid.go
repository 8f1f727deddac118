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
// changes the stanza). The cluster's region (the region tier of
// local-first answers) is learnt the same way: region, else the
// ClusterProperty region_property (mcsapi.RegionProperty by default).

// clusterIDWait bounds each ClusterProperty read at start-up.
const clusterIDWait = 5 * time.Second

// learnClusterID sets the cluster ID and region of the builder's shaping
// from the ClusterProperties when no cluster_id (region) was given and
// some answers could be local-first. It runs before the informers start,
// so every build sees them. Without an ID (no About API, no such
// property, no permission, a value that is not a cluster ID) no endpoint
// is local: answers as with locality none, logged once. Without a region
// (no such property: not an error) no endpoint is in the region tier:
// local-first answers have two tiers; a region property that cannot be
// read or is not a region is logged, and is no region.
func (c *controller) learnClusterID(ctx context.Context) {
	sh := c.acfg.Shaping
	if sh == nil || sh.Locality == answers.LocalityNone {
		return
	}
	next := *sh
	if next.ClusterID == "" {
		id, err := readClusterID(ctx, c.rest)
		if err != nil {
			logf := log.Infof // only imports with a trafficDistribution would be local-first
			if sh.Locality == answers.LocalityLocalFirst {
				logf = log.Warningf
			}
			logf("no cluster ID, so no answer is local-first (set cluster_id, or create the ClusterProperty %s): %v", mcsapi.ClusterIDProperty, err)
			return
		}
		next.ClusterID = id
		log.Infof("cluster ID %q (ClusterProperty %s)", id, mcsapi.ClusterIDProperty)
	}
	if next.Region == "" {
		prop := c.regionProperty
		if prop == "" {
			prop = mcsapi.RegionProperty
		}
		switch region, err := readRegion(ctx, c.rest, prop); {
		case err != nil:
			log.Warningf("no region, so local-first answers have no region tier: %v", err)
		case region == "":
			log.Infof("no region (no ClusterProperty %s), so local-first answers have no region tier", prop)
		default:
			next.Region = region
			log.Infof("region %q (ClusterProperty %s)", region, prop)
		}
	}
	c.acfg.Shaping = &next
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

// readRegion reads the region (memberconn.ReadRegion), within
// clusterIDWait.
func readRegion(ctx context.Context, cfg *rest.Config, property string) (string, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterIDWait)
	defer cancel()
	return memberconn.ReadRegion(ctx, dc, property)
}
