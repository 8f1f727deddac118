// Command kubectl-mcs is the kubectl plugin `kubectl mcs`: the state of a
// Multi-Cluster Services clusterset served by mcs-importer and the mcs
// CoreDNS plugin, read from every member cluster. Install it with
//
//	go install github.com/mcs-dns/mcs-dns/cmd/kubectl-mcs@latest
//
// (or `make build` and put bin/ on $PATH), and kubectl finds it on $PATH
// as `kubectl mcs` (`kubectl plugin list` shows it):
//
//	kubectl mcs status [SERVICE] [--kubeconfig F] [--contexts a,b,c | --context C] [-n NS] [-o table|json|yaml]
//	    [--request-timeout D] [--source-managers M,...] [--export-policy FILE]
//	kubectl mcs explain NAME [TYPE] --in CONTEXT [--dns ADDR] [--corefile FILE]
//	    [--cluster-id ID] [--locality local-first|none|default] [--max-answers N]
//	    [--endpointslice-managers M,...] [--zone ZONE] (and status's flags)
//	kubectl mcs wait NAME [TYPE] [--for resolvable|endpoints=N] [--in CONTEXT]...
//	    [--dns CONTEXT=ADDR]... [--timeout D] [--interval D]
//	kubectl mcs join --hosting-context H --member-context M [--cluster-id ID] [--dry-run] [--rotate]
//	kubectl mcs unjoin --hosting-context H --member-context M [--dry-run]
//	kubectl mcs dns --context M [--apply | --undo] [--server IP]
//
// status shows, per exported service, each export's conditions, each
// member's ServiceImport and the ready endpoints it mirrors per source
// cluster, and what is wrong (missing import, stale endpoints, conflict,
// invalid export, member unreachable). explain shows the objects that
// decide one clusterset.local name's answer in one member, the answer the
// plugin's own code computes from them, why it is empty, and with --dns
// whether that member's CoreDNS agrees. It shapes the answer as that
// CoreDNS does (local-first, max_answers) when --corefile names its
// Corefile, whose mcs stanza it reads with the plugin's own parser, or
// with --cluster-id, --locality and --max-answers. wait polls explain's
// computation until the name answers in the members named (exit code 0,
// 1 when not by --timeout, 2 when it cannot start). join makes a cluster a
// member (CRDs, the importer's identity and token in it, its context in
// the importer's kubeconfig Secret in the hosting cluster), unjoin undoes
// it, and dns adds (or removes) the clusterset.local forwarding in a
// member's cluster DNS Corefile. The commands are
// package cmd (cobra, with kubectl's genericclioptions.ConfigFlags).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcs-dns/mcs-dns/cmd/kubectl-mcs/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
