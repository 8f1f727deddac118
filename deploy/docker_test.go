package deploy_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// No Docker engine runs on the CI machines, so the images are not built
// here. What can be proven is: each Dockerfile is multi-stage and runs as
// non-root, and its build command, run as written, gives a static binary.
func TestDockerfilesBuildStaticBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles both binaries")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) -o /out/(\S+) (\./cmd/\S+)$`)
	for _, name := range []string{"coredns", "mcs-importer"} {
		raw, err := os.ReadFile(filepath.Join("docker", name+".Dockerfile"))
		require.NoError(t, err)
		df := string(raw)
		require.Equal(t, 2, strings.Count(df, "\nFROM ")+boolInt(strings.HasPrefix(df, "FROM ")), "%s: not multi-stage", name)
		require.Contains(t, df, "USER 65532:65532", name)
		require.Contains(t, df, ":nonroot", name)
		m := build.FindStringSubmatch(df)
		require.NotNil(t, m, "%s: no `RUN CGO_ENABLED=0 go build ... -o /out/%s ./cmd/...` line", name, name)
		require.Equal(t, name, m[2])

		out := filepath.Join(t.TempDir(), name)
		// The RUN line as the image's shell would run it, writing here.
		cmd := exec.Command("sh", "-c", m[1]+" -o "+out+" "+m[3])
		cmd.Dir = root
		msg, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", cmd, msg)

		f, err := elf.Open(out)
		require.NoError(t, err)
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "%s is dynamically linked", name)
		}
		f.Close()
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
