package members_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
)

// A member whose role lacks one resource the caches read (EndpointSlices
// may be watched but not listed) is, from its first join attempt on,
// reported as refusing the importer (forbidden), not as unreachable, and
// does not count towards a disruption: with one other member of three
// really unreachable, counting it would make two of three away. Real API
// server and RBAC (the member is reached as a user the test binds a
// ClusterRole to), the unreachable member behind a cut TCP proxy.
func TestForbiddenAtJoinIsNoDisruption(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const user = "importer-without-slice-list"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{"about.k8s.io"}, Resources: []string{"clusterproperties"}, Verbs: []string{"get"}},
	}
	limited := members.Impersonated(ctx, t, east, user, rules)

	u, err := url.Parse(east.Config.Host)
	require.NoError(t, err)
	p, err := netcut.Start(u.Host)
	require.NoError(t, err)
	defer p.Close()
	p.Cut()
	cut := rest.CopyConfig(east.Config)
	cut.Host = "https://" + p.Addr()

	s := members.NewSet(members.SetOptions{
		Members: []members.Config{
			{Context: "limited", REST: limited},
			{Context: "cut", REST: cut},
			{Context: "ok", REST: rest.CopyConfig(east.Config)},
		},
		ConnectTimeout: 5 * time.Second, SyncTimeout: 3 * time.Second,
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: time.Second,
		Grace:    time.Hour,
		Notify:   func(members.Event) {},
		OnChange: func(members.Change) {},
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()

	select {
	case <-s.Settled():
	case <-ctx.Done():
		t.Fatal("the members were never all tried")
	}
	status := func(context string) members.Status {
		for _, st := range s.Statuses() {
			if st.Context == context {
				return st
			}
		}
		t.Fatalf("no member %s", context)
		return members.Status{}
	}
	// Every decision for a second (ten probe intervals), and the join
	// attempts retried meanwhile.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		require.False(t, s.Disruption().Active, "a refusal counted towards a disruption: %+v", s.Statuses())
		time.Sleep(20 * time.Millisecond)
	}
	lim := status("limited")
	assert.Equal(t, members.Unknown, lim.State)
	assert.True(t, strings.HasPrefix(lim.Reason, "forbidden"), "reason %q", lim.Reason)
	assert.Contains(t, lim.Reason, "endpointslices")
	assert.NotContains(t, lim.Reason, "unreachable")
	assert.True(t, strings.HasPrefix(status("cut").Reason, "unreachable"), "reason %q", status("cut").Reason)
	assert.Equal(t, members.Up, status("ok").State)
}

// A role that may read the cluster-ID ClusterProperty but not the region
// one (a role made before regions, or a --region-property it does not
// name) lets the member join without a region: a region only orders DNS
// answers, so it never keeps a member out. Real API server and RBAC.
func TestRegionForbiddenJoinsWithoutRegion(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, east.SetClusterProperty(ctx, "region.topology.kubernetes.io", "eu-west"))
	const user = "importer-without-region"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"about.k8s.io"}, Resources: []string{"clusterproperties"}, ResourceNames: []string{"cluster.clusterset.k8s.io"}, Verbs: []string{"get"}},
	}
	limited := members.Impersonated(ctx, t, east, user, rules)

	s := members.NewSet(members.SetOptions{
		Members:        []members.Config{{Context: "limited", REST: limited}, {Context: "admin", REST: rest.CopyConfig(east.Config)}},
		ConnectTimeout: 5 * time.Second, SyncTimeout: 10 * time.Second,
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: time.Second,
		Grace:    time.Hour,
		Notify:   func(members.Event) {},
		OnChange: func(members.Change) {},
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()

	regions := map[string]string{}
	require.Eventually(t, func() bool {
		for _, m := range s.Members() {
			if m.State() == members.Up {
				regions[m.Context] = m.Region
			}
		}
		return len(regions) == 2
	}, time.Minute, 20*time.Millisecond, "the members did not both join: %+v", s.Statuses())
	assert.Equal(t, "", regions["limited"], "the member that may not read its region")
	assert.Equal(t, "eu-west", regions["admin"], "the member that may")
}
