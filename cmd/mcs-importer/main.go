// Command mcs-importer keeps a clusterset's ServiceImports and mirrored
// EndpointSlices true to its ServiceExports. See `mcs-importer --help` and
// package github.com/mcs-dns/mcs-dns/importer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"k8s.io/klog/v2"

	"github.com/mcs-dns/mcs-dns/importer"
)

func main() {
	os.Exit(run())
}

func run() int {
	opts, err := importer.ParseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(os.Stderr, "mcs-importer: %v\nRun mcs-importer --help for usage.\n", err)
		return 2
	}
	log := importer.NewLogger(opts, os.Stderr)
	opts.Log = log
	// client-go logs through klog: send it to the same structured log.
	klog.SetSlogLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if _, err := importer.ApplyMemoryLimit(ctx, opts.MemoryLimitRatio, memlimit.FromCgroup, log); err != nil {
		// The importer runs on without one, as it would outside a
		// container.
		log.Warn("no soft memory limit", "err", err)
	}
	if err := importer.Run(ctx, opts); err != nil {
		log.Error("mcs-importer failed", "err", err)
		return 1
	}
	return 0
}
