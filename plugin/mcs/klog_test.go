package mcs

import (
	"bytes"
	"errors"
	golog "log"
	"os"
	"strings"
	"testing"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"
)

// client-go's klog lines come out through CoreDNS's log, with the plugin's
// prefix, the error and the key/value pairs.
func TestKlogRouted(t *testing.T) {
	var buf bytes.Buffer
	golog.SetOutput(&buf)
	defer golog.SetOutput(os.Stderr)
	clog.D.Set()
	defer clog.D.Clear()
	routeKlog()
	defer klog.ClearLogger()

	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "reflector", "pkg/mcs/informer.go:1", "type", 42)
	klog.LoggerWithValues(klog.Background(), "odd").Info("with values", "k", "v")
	klog.Flush()
	out := buf.String()
	assert.Contains(t, out, "[ERROR] plugin/mcs: Failed to watch: connection refused reflector=\"pkg/mcs/informer.go:1\" type=42")
	assert.Contains(t, out, "[INFO] plugin/mcs: with values odd=\"(MISSING)\" k=\"v\"")
	assert.False(t, strings.Contains(out, "E1206"), "no klog-format line: %s", out)
}
