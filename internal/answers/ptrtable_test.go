package answers

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPTRTable checks the table against a map through inserts, updates
// and deletes that grow it through several shard doublings and shrink it
// again.
func TestPTRTable(t *testing.T) {
	sets := []*Set{{key: "a"}, {key: "b"}, {key: "c"}}
	var tab ptrTable[key4]
	want := map[key4]ptrRef{}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func() {
		t.Helper()
		n := 0
		tab.each(func(k key4) {
			n++
			_, ok := want[k]
			assert.True(t, ok, "each yields only stored keys")
		})
		require.Equal(t, len(want), n)
		require.Equal(t, len(want), tab.n)
		for k, r := range want {
			got, ok := tab.load(k)
			require.True(t, ok)
			require.Equal(t, r, got)
		}
	}
	for round := range 3 {
		for range 20000 {
			k := key4(rng.Uint32N(1 << 16))
			r := ptrRef{set: sets[rng.IntN(len(sets))], j: rng.Uint32N(10)}
			if rng.IntN(4) == 0 {
				tab.delete(k)
				delete(want, k)
				continue
			}
			tab.store(k, r)
			want[k] = r
		}
		check()
		for k := range want {
			if rng.IntN(2) == 0 || round == 2 {
				tab.delete(k)
				delete(want, k)
			}
		}
		check()
		_, ok := tab.load(key4(1 << 20))
		assert.False(t, ok)
	}
	assert.Greater(t, len(tab.cur.Load().shards), 1<<ptrShardBitsMin, "the shards doubled")
}

// TestPTRTableKeysOrder: keys compare as the addresses they are.
func TestPTRTableKeysOrder(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.255"), netip.MustParseAddr("10.0.1.0")
	assert.Negative(t, keyOf4(a).compare(keyOf4(b)))
	c, d := netip.MustParseAddr("fd00::ffff:ffff"), netip.MustParseAddr("fd00::1:0:0")
	assert.Negative(t, keyOf6(c).compare(keyOf6(d)))
	assert.Zero(t, keyOf6(c).compare(keyOf6(netip.MustParseAddr("fd00::ffff:ffff"))))
}

// TestPTRTableConcurrent: readers see every key that is never deleted
// while a writer inserts and deletes others (run with -race).
func TestPTRTableConcurrent(t *testing.T) {
	var tab ptrTable[key6]
	set := &Set{key: "x"}
	stable := make([]key6, 100)
	for i := range stable {
		stable[i] = key6{hi: 1, lo: uint64(i)}
		tab.store(stable[i], ptrRef{set: set, j: uint32(i)})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := range 50000 {
			k := key6{hi: 2, lo: uint64(i)}
			tab.store(k, ptrRef{set: set})
			if i%3 == 0 {
				tab.delete(k)
			}
		}
		close(stop)
	})
	for r := 0; ; r++ {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		k := stable[r%len(stable)]
		got, ok := tab.load(k)
		require.True(t, ok)
		require.Equal(t, uint32(r%len(stable)), got.j)
	}
}

func BenchmarkPTRTableLoad(b *testing.B) {
	var tab ptrTable[key4]
	for i := range 120000 {
		tab.store(key4(0x0a400000+i), ptrRef{set: &Set{}})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = tab.load(key4(0x0a400000 + i%120000))
		i++
	}
}
