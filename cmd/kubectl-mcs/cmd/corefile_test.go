package cmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubeadmCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

// Adding then removing gives back the Corefile byte for byte, whatever
// its last line ends with; adding twice changes nothing the second time.
func TestClustersetBlockRoundTrip(t *testing.T) {
	for name, orig := range map[string]string{
		"kubeadm":            kubeadmCorefile,
		"no final newline":   strings.TrimSuffix(kubeadmCorefile, "\n"),
		"blank line at end":  kubeadmCorefile + "\n",
		"empty":              "",
		"text after a block": kubeadmCorefile + "# a comment\n",
	} {
		t.Run(name, func(t *testing.T) {
			added, changed, err := AddClustersetBlock(orig, "10.96.0.53")
			require.NoError(t, err)
			require.True(t, changed)
			assert.Contains(t, added, "clusterset.local:53 {\n")
			assert.Contains(t, added, "    forward . 10.96.0.53\n")
			assert.True(t, strings.HasPrefix(added, orig), "the original is kept as it is")

			again, changed, err := AddClustersetBlock(added, "10.96.0.53")
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, added, again)

			back, changed, err := RemoveClustersetBlock(added)
			require.NoError(t, err)
			assert.True(t, changed)
			assert.Equal(t, orig, back)

			same, changed, err := RemoveClustersetBlock(orig)
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, orig, same)
		})
	}
}

// A new address replaces the marked block in place.
func TestClustersetBlockNewServer(t *testing.T) {
	added, _, err := AddClustersetBlock(kubeadmCorefile, "10.96.0.53")
	require.NoError(t, err)
	moved, changed, err := AddClustersetBlock(added+"other.zone {\n}\n", "10.96.7.7")
	require.NoError(t, err)
	assert.True(t, changed)
	assert.NotContains(t, moved, "10.96.0.53")
	assert.Contains(t, moved, "forward . 10.96.7.7\n")
	assert.Equal(t, 1, strings.Count(moved, corefileBegin))
	back, _, err := RemoveClustersetBlock(moved)
	require.NoError(t, err)
	assert.Equal(t, kubeadmCorefile+"other.zone {\n}\n", back)
}

// A clusterset.local block written by hand is not touched.
func TestClustersetBlockByHand(t *testing.T) {
	for _, opening := range []string{"clusterset.local {", "clusterset.local:53 {", "dns://clusterset.local.:53 {", "example.org clusterset.local {"} {
		_, _, err := AddClustersetBlock(kubeadmCorefile+opening+"\n    forward . 10.1.1.1\n}\n", "10.96.0.53")
		require.Error(t, err, opening)
		assert.Contains(t, err.Error(), "not added by kubectl mcs dns")
	}
	// Another zone under clusterset.local is not that block.
	_, changed, err := AddClustersetBlock(kubeadmCorefile+"east.clusterset.local {\n}\n", "10.96.0.53")
	require.NoError(t, err)
	assert.True(t, changed)
}

func TestClustersetBlockBroken(t *testing.T) {
	_, _, err := AddClustersetBlock(kubeadmCorefile, "mcs-dns.svc")
	assert.ErrorContains(t, err, "want an IP address")
	_, _, err = RemoveClustersetBlock(kubeadmCorefile + corefileBegin + "\nclusterset.local:53 {\n}\n")
	assert.ErrorContains(t, err, "not its end marker")
	_, _, err = AddClustersetBlock(kubeadmCorefile+corefileEnd+"\n", "10.96.0.53")
	assert.ErrorContains(t, err, "not its begin marker")
	// IPv6 servers are addresses too.
	out, _, err := AddClustersetBlock("", "fd00:10:96::a")
	require.NoError(t, err)
	assert.Contains(t, out, "forward . fd00:10:96::a\n")
}
