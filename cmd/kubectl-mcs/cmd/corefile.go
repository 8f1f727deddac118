package cmd

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
)

// The server block kubectl mcs dns adds to a cluster DNS Corefile sits
// between two marker lines, so that --apply can tell its own block from
// one written by hand and --undo removes exactly what --apply added.
const (
	corefileBegin = "# BEGIN kubectl-mcs dns: clusterset.local to mcs-dns (kubectl mcs dns --undo removes this block)"
	corefileEnd   = "# END kubectl-mcs dns"
)

// clustersetBlock is the server block of
// corefile-examples/forward-from-cluster-dns.Corefile, forwarding to
// server, between the markers (each line ending in a newline).
func clustersetBlock(server string) string {
	return corefileBegin + "\n" +
		"clusterset.local:53 {\n" +
		"    errors {\n" +
		"        consolidate 30s \".*\" warning show_first\n" +
		"    }\n" +
		"    bufsize 1232\n" +
		"    forward . " + server + "\n" +
		"}\n" +
		corefileEnd + "\n"
}

// zoneLine matches a server block's opening line that serves
// clusterset.local (alone or among other zones, with or without a
// scheme or port).
var zoneLine = regexp.MustCompile(`(?m)^[ \t]*([^#{\n]*\s)?(dns://)?clusterset\.local\.?(:\d+)?(\s[^#{\n]*)?\{`)

// markedRegion finds the marked block: the offsets of its first byte
// (the newline --apply put before the begin marker, when it is there)
// and of the byte after the end marker's line.
func markedRegion(corefile string) (start, end int, ok bool, err error) {
	b := strings.Index(corefile, corefileBegin)
	if b < 0 {
		if strings.Contains(corefile, corefileEnd) {
			return 0, 0, false, errors.New("the Corefile has the end marker of a kubectl mcs dns block but not its begin marker: fix it by hand")
		}
		return 0, 0, false, nil
	}
	if b > 0 && corefile[b-1] != '\n' {
		return 0, 0, false, errors.New("the begin marker of the kubectl mcs dns block is not at the start of a line: fix it by hand")
	}
	e := strings.Index(corefile[b:], corefileEnd)
	if e < 0 {
		return 0, 0, false, errors.New("the Corefile has the begin marker of a kubectl mcs dns block but not its end marker: fix it by hand")
	}
	end = b + e + len(corefileEnd)
	if end < len(corefile) && corefile[end] == '\n' {
		end++
	}
	start = b
	if b > 0 {
		start = b - 1
	}
	return start, end, true, nil
}

// AddClustersetBlock returns corefile with the marked clusterset.local
// server block forwarding to server, and whether that is a change. A
// marked block already there is replaced (the address may have changed);
// a clusterset.local server block written by hand is an error, since
// CoreDNS refuses two blocks for one zone and port. The block is appended
// after a newline, which RemoveClustersetBlock removes with it, so that
// removing it gives back corefile byte for byte.
func AddClustersetBlock(corefile, server string) (string, bool, error) {
	if net.ParseIP(server) == nil {
		return "", false, fmt.Errorf("server %q: want an IP address", server)
	}
	start, end, ok, err := markedRegion(corefile)
	if err != nil {
		return "", false, err
	}
	rest := corefile
	if ok {
		rest = corefile[:start] + corefile[end:]
	}
	if loc := zoneLine.FindStringIndex(rest); loc != nil {
		line := strings.TrimSpace(rest[loc[0]:loc[1]])
		return "", false, fmt.Errorf("the Corefile already has a clusterset.local server block not added by kubectl mcs dns (%q): remove it, or forward to %s there by hand", line, server)
	}
	block := clustersetBlock(server)
	if ok {
		cur := corefile[start:end]
		if strings.TrimPrefix(cur, "\n") == block {
			return corefile, false, nil
		}
		lead := ""
		if strings.HasPrefix(cur, "\n") {
			lead = "\n"
		}
		return corefile[:start] + lead + block + corefile[end:], true, nil
	}
	return corefile + "\n" + block, true, nil
}

// RemoveClustersetBlock returns corefile without the marked block (and
// the newline added before it), and whether there was one.
func RemoveClustersetBlock(corefile string) (string, bool, error) {
	start, end, ok, err := markedRegion(corefile)
	if err != nil || !ok {
		return corefile, false, err
	}
	return corefile[:start] + corefile[end:], true, nil
}
