// Package readme starts every Corefile the project's READMEs show, as
// CoreDNS's own test/readme_test.go does for its plugins' READMEs: a
// documented Corefile that our CoreDNS refuses, or that answers SERVFAIL,
// is a bug in the docs or in the code.
package readme

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// block is one Corefile shown in a README.
type block struct {
	file string
	line int
	text string
}

// skipDirs hold no README of ours (build output, caches, third-party
// copies: the conformance suite, the upstream CoreDNS chart).
var skipDirs = map[string]bool{".git": true, ".cache": true, ".bench": true, ".demo": true, "bin": true, "node_modules": true, "suite": true, "coredns-upstream": true}

// corefileBlocks returns every block fenced as ~~~ corefile or ```corefile
// in the Markdown files under root.
func corefileBlocks(t *testing.T, root string) []block {
	t.Helper()
	var out []block
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(f)
		var cur *block
		var fence string
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			switch {
			case cur == nil:
				for _, open := range []string{"~~~", "```"} {
					if rest, ok := strings.CutPrefix(trimmed, open); ok && strings.EqualFold(strings.TrimSpace(rest), "corefile") {
						cur, fence = &block{file: rel, line: n}, open
					}
				}
			case trimmed == fence:
				out = append(out, *cur)
				cur = nil
			default:
				cur.text += line + "\n"
			}
		}
		return sc.Err()
	})
	require.NoError(t, err)
	return out
}

var (
	// kubeBlock: an mcs or kubernetes line opening a block.
	kubeBlock = regexp.MustCompile(`(?m)^(\s*)(mcs|kubernetes)\b([^{\n]*)\{[ \t]*$`)
	// kubeBare: an mcs or kubernetes line without a block.
	kubeBare = regexp.MustCompile(`(?m)^(\s*)(mcs|kubernetes)\b([^{\n]*)$`)
	// kubeconfigLine: a kubeconfig option the test points at its cluster.
	kubeconfigLine = regexp.MustCompile(`(?m)^\s*kubeconfig\s.*$`)
	// listeners: plugins that listen on a fixed port by default.
	listeners = regexp.MustCompile(`(?m)^(\s*)(ready|health|prometheus)\b[^{\n]*$`)
)

// adapt points a documented Corefile at the test's cluster: every mcs and
// kubernetes block gets the test's kubeconfig (in place of the one shown,
// which names a file on the reader's machine), and the plugins that
// listen on fixed ports get free ones.
func adapt(t *testing.T, text, kubeconfig, context string) string {
	t.Helper()
	text = kubeconfigLine.ReplaceAllString(text, "")
	kc := "kubeconfig " + kubeconfig + " " + context
	text = kubeBlock.ReplaceAllString(text, "$1$2$3{\n$1    "+kc)
	text = kubeBare.ReplaceAllString(text, "$1$2$3 {\n$1    "+kc+"\n$1}")
	return listeners.ReplaceAllStringFunc(text, func(l string) string {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		name := strings.Fields(l)[0]
		return fmt.Sprintf("%s%s 127.0.0.1:%d", indent, name, procs.FreePort(t))
	})
}

// TestREADMECorefiles starts our CoreDNS with every Corefile the READMEs
// show, pointed at a real API server, and asks it for a name of
// clusterset.local over UDP and TCP: it must start, and answer without
// SERVFAIL.
func TestREADMECorefiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server and CoreDNS; skipped with -short")
	}
	blocks := corefileBlocks(t, filepath.Join("..", ".."))
	require.GreaterOrEqual(t, len(blocks), 6, "the READMEs' Corefiles were not found")
	set := cluster.Start(t, cluster.Names("east")...)
	bin := procs.CoreDNSBinary(t)
	for _, b := range blocks {
		t.Run(b.file+":"+strconv.Itoa(b.line), func(t *testing.T) {
			corefile := adapt(t, b.text, set.Kubeconfig, "east")
			c := procs.StartCoreDNS(t, bin, corefile)
			for _, proto := range []string{"udp", "tcp"} {
				r, err := procs.Query(c.Addr, proto, "nothing.no-such-namespace.svc.clusterset.local.", dns.TypeA)
				if assert.NoError(t, err, "%s over %s\n%s", b.file, proto, corefile) {
					assert.NotEqual(t, dns.RcodeServerFailure, r.Rcode, "%s:%d over %s: SERVFAIL\n%s", b.file, b.line, proto, corefile)
				}
			}
		})
	}
}
