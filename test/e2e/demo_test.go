package e2e

import (
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// TestDemo runs `make demo`'s program twice in a row on the same folder and
// ports, as a user would: the second run stops the first and shows every
// answer the README promises.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers")
	}
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("the demo prints dig's answers and dig is not installed: `make apt` (or `make demo`) installs it (Debian package bind9-dnsutils)")
	}
	bins := procs.Build(t)
	demo := filepath.Join(t.TempDir(), "demo")
	out, err := exec.Command("go", "build", "-o", demo, "github.com/mcs-dns/mcs-dns/hack/demo").CombinedOutput()
	require.NoError(t, err, "%s", out)
	dir := t.TempDir()
	port := strconv.Itoa(threeFreePorts(t))
	args := []string{"-dir", dir, "-bin", filepath.Dir(bins.CoreDNS), "-base-port", port, "-timeout", "4m"}

	first := procs.Start(t, "demo-1", demo, args...)
	require.Eventually(t, func() bool { return strings.Contains(first.Output(), "the demo is running") || first.Exited() },
		8*time.Minute, 200*time.Millisecond)
	require.False(t, first.Exited(), "first demo exited:\n%s", first.Output())

	second := procs.Start(t, "demo-2", demo, append(args, "-wait=false")...)
	require.NoError(t, second.Wait(), "second demo failed:\n%s", second.Output())
	require.True(t, first.Exited(), "the second demo did not stop the first")
	got := second.Output()
	for _, want := range []string{
		"stopping the demo already running",
		"web.demo.svc.clusterset.local. 5 IN A", // the VIP (derived Service ClusterIP)
		// Pod IPs come from each member's pod range (kwok's Node).
		"db.demo.svc.clusterset.local. 5 IN A 10.10.0.",
		"db.demo.svc.clusterset.local. 5 IN A 10.20.0.",
		"db-0.east.db.demo.svc.clusterset.local. 5 IN A 10.10.0.",
		"IN SRV 0 33 5432 db-0.west.db.demo.svc.clusterset.local.",
		".0.10.10.in-addr.arpa. 5 IN PTR db-0.east.db.demo.svc.clusterset.local.",
		"status: NXDOMAIN",
		"db now has two ready pods",
		"db is gone from the clusterset",
	} {
		require.Contains(t, strings.Join(strings.Fields(got), " "), want, "demo output:\n%s", got)
	}
}

// threeFreePorts returns a port p such that p, p+1 and p+2 are free on
// 127.0.0.1 for TCP and UDP (the demo's three CoreDNS servers), outside
// the range the kernel hands out to client sockets.
func threeFreePorts(t *testing.T) int {
	for range 100 {
		// Below Linux's ephemeral range (32768-60999): the demo binds
		// these ports again after a restart, and meanwhile a client
		// socket of a test running in parallel must not take one.
		p := 20000 + rand.IntN(12000)
		ok := true
		for _, q := range []int{p, p + 1, p + 2} {
			addr := "127.0.0.1:" + strconv.Itoa(q)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				ok = false
				break
			}
			u, err := net.ListenPacket("udp", addr)
			l.Close()
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no three consecutive free ports")
	return 0
}
