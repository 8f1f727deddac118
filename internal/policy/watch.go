package policy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"
)

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("export policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, data, fmt.Errorf("%s: %w", path, err)
	}
	return p, data, nil
}

// Watch reads the file at path every interval until ctx ends. When its
// content changes it is parsed: a good policy goes to changed, and an
// error (it does not parse, or cannot be read) to failed, once per
// content, the policy in force staying as it was. last is the content
// already in force. A file a ConfigMap mounts is replaced by a symlink
// swap, which a read sees whole.
func Watch(ctx context.Context, path string, interval time.Duration, last []byte, changed func(*Policy), failed func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	seen := last
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		if bytes.Equal(data, seen) {
			continue
		}
		seen = data
		if err != nil {
			failed(fmt.Errorf("export policy: %w", err))
			continue
		}
		p, err := Parse(data)
		if err != nil {
			failed(fmt.Errorf("%s: %w", path, err))
			continue
		}
		changed(p)
	}
}
