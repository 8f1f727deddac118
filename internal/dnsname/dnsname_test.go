package dnsname

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const zone = "clusterset.local."
	tests := []struct {
		qname string
		want  Name
	}{
		{"clusterset.local.", Name{Kind: Apex}},
		{"dns-version.clusterset.local.", Name{Kind: DNSVersion}},
		{"ns.dns.clusterset.local.", Name{Kind: NSHost}},
		{"dns.clusterset.local.", Name{Kind: DNSNode}},
		{"svc.clusterset.local.", Name{Kind: SvcNode}},
		{"demo.svc.clusterset.local.", Name{Kind: Namespace, Namespace: "demo"}},
		{"web.demo.svc.clusterset.local.", Name{Kind: Service, Namespace: "demo", Service: "web", Key: "web.demo"}},
		{"_http._tcp.web.demo.svc.clusterset.local.", Name{Kind: Service, Namespace: "demo", Service: "web", Key: "web.demo", Prefix: "_http._tcp"}},
		{"web-0.east.db.demo.svc.clusterset.local.", Name{Kind: Service, Namespace: "demo", Service: "db", Key: "db.demo", Prefix: "web-0.east"}},
		{"web-0.eu.west.db.demo.svc.clusterset.local.", Name{Kind: Service, Namespace: "demo", Service: "db", Key: "db.demo", Prefix: "web-0.eu.west"}},
		{"east.db.demo.svc.clusterset.local.", Name{Kind: Service, Namespace: "demo", Service: "db", Key: "db.demo", Prefix: "east"}},
		// a namespace called svc
		{"web.svc.svc.clusterset.local.", Name{Kind: Service, Namespace: "svc", Service: "web", Key: "web.svc"}},
		// not names of the spec
		{"foo.clusterset.local.", Name{}},
		{"a.dns-version.clusterset.local.", Name{}},
		{"x.ns.dns.clusterset.local.", Name{}},
		{"web.demo.pod.clusterset.local.", Name{}},
		{"web\\.x.demo.svc.clusterset.local.", Name{}},
		{"other.local.", Name{}},
		{"xclusterset.local.", Name{}},
	}
	for _, tt := range tests {
		t.Run(tt.qname, func(t *testing.T) {
			if got := Parse(tt.qname, zone); got != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.qname, got, tt.want)
			}
		})
	}
}

func TestParseRootZone(t *testing.T) {
	got := Parse("web.demo.svc.", ".")
	want := Name{Kind: Service, Namespace: "demo", Service: "web", Key: "web.demo"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := Parse(".", "."); got.Kind != Apex {
		t.Errorf("root apex: %+v", got)
	}
}

func TestInZone(t *testing.T) {
	tests := []struct {
		qname, zone string
		want        bool
	}{
		{"clusterset.local.", "clusterset.local.", true},
		{"a.clusterset.local.", "clusterset.local.", true},
		{"aclusterset.local.", "clusterset.local.", false},
		{"a\\.clusterset.local.", "clusterset.local.", false},
		{"a\\\\.clusterset.local.", "clusterset.local.", true},
		{"local.", "clusterset.local.", false},
		{"anything.", ".", true},
		{"3.2.1.10.in-addr.arpa.", "10.in-addr.arpa.", true},
		{"3.2.1.110.in-addr.arpa.", "10.in-addr.arpa.", false},
	}
	for _, tt := range tests {
		if got := InZone(tt.qname, tt.zone); got != tt.want {
			t.Errorf("InZone(%q, %q) = %v, want %v", tt.qname, tt.zone, got, tt.want)
		}
	}
}

func TestMatchLongest(t *testing.T) {
	zones := []string{"in-addr.arpa.", "clusterset.local.", "10.in-addr.arpa."}
	if got := Match("1.0.0.10.in-addr.arpa.", zones); got != 2 {
		t.Errorf("got %d, want 2", got)
	}
	if got := Match("web.demo.svc.clusterset.local.", zones); got != 1 {
		t.Errorf("got %d, want 1", got)
	}
	if got := Match("example.com.", zones); got != -1 {
		t.Errorf("got %d, want -1", got)
	}
}

func TestLower(t *testing.T) {
	if got := Lower("WEB.Demo.svc.ClusterSet.local."); got != "web.demo.svc.clusterset.local." {
		t.Errorf("got %q", got)
	}
	s := "web.demo.svc.clusterset.local."
	if n := testing.AllocsPerRun(100, func() { _ = Lower(s) }); n != 0 {
		t.Errorf("Lower of a lower-case name allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Parse(s, "clusterset.local.") }); n != 0 {
		t.Errorf("Parse allocates %v times", n)
	}
}

// FuzzParse checks that Parse never panics and that the parts of a
// Service name put back together give the query name.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"clusterset.local.", "web.demo.svc.clusterset.local.", "_http._tcp.web.demo.svc.clusterset.local.",
		"h.a.b.c.db.demo.svc.clusterset.local.", ".svc.clusterset.local.", "..svc.clusterset.local.",
		"a..b.svc.clusterset.local.", "\\..svc.clusterset.local.", "svc.svc.svc.clusterset.local.", "",
	} {
		f.Add(s)
	}
	const zone = "clusterset.local."
	f.Fuzz(func(t *testing.T, qname string) {
		qname = Lower(qname)
		if !InZone(qname, zone) {
			if got := Parse(qname, zone); got != (Name{}) {
				t.Fatalf("name outside the zone parsed as %+v", got)
			}
			return
		}
		n := Parse(qname, zone)
		switch n.Kind {
		case Service:
			rebuilt := n.Service + "." + n.Namespace + ".svc." + zone
			if n.Prefix != "" {
				rebuilt = n.Prefix + "." + rebuilt
			}
			if rebuilt != qname {
				t.Fatalf("parts %+v give %q, not %q", n, rebuilt, qname)
			}
			if n.Key != n.Service+"."+n.Namespace {
				t.Fatalf("key %q", n.Key)
			}
			for _, part := range []string{n.Service, n.Namespace} {
				if part == "" || strings.Contains(part, ".") {
					t.Fatalf("bad label %q in %+v", part, n)
				}
			}
			if strings.HasPrefix(n.Prefix, ".") || strings.HasSuffix(n.Prefix, ".") {
				t.Fatalf("prefix %q", n.Prefix)
			}
		case Namespace:
			if n.Namespace+".svc."+zone != qname {
				t.Fatalf("namespace %+v of %q", n, qname)
			}
		}
	})
}
