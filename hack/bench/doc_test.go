package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpdateDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(path, []byte("# Benchmarks\n\nHow.\n\n## Latest results\n\nold numbers\n### old table\n"), 0o644))
	require.NoError(t, updateDoc(path, "# mcs-dns benchmark results\n\nRun X.\n\n## Targets\n\n| a | b |\n"))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# Benchmarks\n\nHow.\n\n## Latest results\n\nWritten by `make bench`: the run's `.bench/results.md`, unedited.\n\nRun X.\n\n### Targets\n\n| a | b |\n", string(got))

	require.NoError(t, os.WriteFile(path, []byte("# Benchmarks\n"), 0o644))
	require.Error(t, updateDoc(path, "# t\n"), "no section to replace")
}
