package cmd

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// waitUp polls the importer's metrics until it reports member id up
// (mcs_importer_member_state{cluster=id,state="up"} 1), for o.Wait.
func (o *JoinOptions) waitUp(ctx context.Context, id string) error {
	start := time.Now()
	last := "not asked yet"
	err := waitFor(ctx, o.Wait, fmt.Sprintf("the importer at %s to report member %q up", o.ImporterMetrics, id), func(ctx context.Context) (bool, error) {
		state, err := memberState(ctx, o.ImporterMetrics, id)
		switch {
		case err != nil:
			last = err.Error()
		case state == "":
			last = "it does not know the member (is it in the importer's --contexts, and was the importer restarted since?)"
		default:
			last = "member " + state
		}
		return err == nil && state == "up", nil
	})
	if err != nil {
		return fmt.Errorf("%w: last: %s", err, last)
	}
	fmt.Fprintf(o.Out, "the importer reports member %q up (after %s)\n", id, time.Since(start).Round(time.Millisecond))
	return nil
}

// memberState is the state mcs_importer_member_state says cluster id is
// in at url ("" when no series names it).
func memberState(ctx context.Context, url, id string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "mcs_importer_member_state{") || !strings.HasSuffix(line, " 1") {
			continue
		}
		end := strings.IndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := line[len("mcs_importer_member_state{"):end]
		if !strings.Contains(labels, `cluster="`+id+`"`) {
			continue
		}
		if _, st, ok := strings.Cut(labels, `state="`); ok {
			st, _, _ = strings.Cut(st, `"`)
			return st, nil
		}
	}
	return "", sc.Err()
}
