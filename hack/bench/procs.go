package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcs-dns/mcs-dns/test/stack"
)

// children is every process the bench starts, so that all of them are
// stopped on normal exit, on error and on Ctrl-C.
var children = stack.NewGroup()

// reapLeftovers stops processes a previous, killed bench run left behind:
// only those running a binary from this bench's own bin folder.
func reapLeftovers(binDir string) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		if strings.HasPrefix(exe, binDir+string(filepath.Separator)) && filepath.Base(exe) != "bench" {
			fmt.Fprintf(os.Stderr, "bench: stopping leftover %s (pid %d) from an earlier run\n", exe, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// linkOrCopy places src at dst (hard link if link, else copy), replacing dst.
func linkOrCopy(src, dst string, link bool) error {
	_ = os.Remove(dst)
	if link {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// waitCtx sleeps d unless ctx ends first.
func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
