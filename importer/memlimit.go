package importer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRefresh is how often the container's memory limit is read
// again, so that an in-place resize of the pod moves the soft limit too.
const memoryLimitRefresh = time.Minute

// ApplyMemoryLimit sets the Go runtime's soft memory limit to ratio of
// the memory limit provider reports (memlimit.FromCgroup: the
// container's), and reads it again every minute until ctx is done. The
// importer's live heap is a fraction of its peak: a cold start over many
// members decodes every member's lists and writes tens of thousands of
// objects, and with the default GOGC the heap may grow to twice what is
// live before a collection. Near a container limit that is the
// difference between collecting harder and being killed for memory (and
// starting the cold start again).
//
// Nothing is set when ratio is 0, when the GOMEMLIMIT environment
// variable is set (it wins, as for any Go program), or when there is no
// limit. It returns the soft limit in force afterwards.
func ApplyMemoryLimit(ctx context.Context, ratio float64, provider memlimit.Provider, log *slog.Logger) (int64, error) {
	current := debug.SetMemoryLimit(-1)
	switch {
	case ratio == 0:
		return current, nil
	case os.Getenv("GOMEMLIMIT") != "":
		log.Info("GOMEMLIMIT is set: the container's memory limit is not applied", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
		return current, nil
	}
	// A provider that cannot read the limit now would fail every
	// refresh too (and log each time): nothing is started then.
	if _, err := provider(); err != nil && !errors.Is(err, memlimit.ErrNoLimit) {
		return current, fmt.Errorf("reading the container's memory limit: %w", err)
	}
	// memlimit logs the limit it sets, at start and on each change.
	limit, err := memlimit.Set(
		memlimit.WithRatio(ratio),
		memlimit.WithProvider(provider),
		memlimit.WithRefreshInterval(ctx, memoryLimitRefresh),
		memlimit.WithLogger(log.With("component", "memlimit")),
	)
	if err != nil {
		return limit, fmt.Errorf("setting the soft memory limit from the container's: %w", err)
	}
	return limit, nil
}
