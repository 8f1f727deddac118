package mcs

import (
	"sync"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// servedGauges is one controller's contribution to the served gauges
// (coredns_mcs_imports, coredns_mcs_endpoints), which it takes back when
// it stops: a reload runs two controllers for a moment, and stanzas that
// differ run one each.
type servedGauges struct {
	sync.Mutex
	imports   [3]float64 // by answers.Type
	endpoints float64
}

// account moves the gauges by the difference between two sets of
// answers of one service (nil: none).
func (g *servedGauges) account(old, set *answers.Set) {
	g.Lock()
	defer g.Unlock()
	for _, s := range []struct {
		set  *answers.Set
		sign float64
	}{{old, -1}, {set, +1}} {
		if s.set == nil {
			continue
		}
		importsServed.WithLabelValues(s.set.Type().String()).Add(s.sign)
		g.imports[s.set.Type()] += s.sign
		n := s.sign * float64(s.set.Endpoints())
		endpointsServed.Add(n)
		g.endpoints += n
	}
}

// withdraw takes the whole contribution off the gauges.
func (g *servedGauges) withdraw() {
	g.Lock()
	defer g.Unlock()
	for t, n := range g.imports {
		if n != 0 {
			importsServed.WithLabelValues(answers.Type(t).String()).Sub(n)
		}
	}
	endpointsServed.Sub(g.endpoints)
	g.imports = [3]float64{}
	g.endpoints = 0
}
