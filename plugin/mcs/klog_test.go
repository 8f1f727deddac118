package mcs

import (
	"bytes"
	"errors"
	golog "log"
	"os"
	"testing"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"
)

// client-go's klog lines, through the sink init installs, come out in
// CoreDNS's log with the plugin's prefix, the error and the key/value
// pairs. (The sink is driven through logr directly: setting klog's global
// logger here would race with other tests' informers.)
func TestKlogSink(t *testing.T) {
	var buf bytes.Buffer
	golog.SetOutput(&buf)
	defer golog.SetOutput(os.Stderr)
	clog.D.Set()
	defer clog.D.Clear()
	l := logr.New(klogSink{p: log})

	l.Error(errors.New("connection refused"), "Failed to watch", "reflector", "pkg/mcs/informer.go:1", "type", 42)
	l.WithValues("odd").Info("with values", "k", "v")
	out := buf.String()
	assert.Contains(t, out, "[ERROR] plugin/mcs: Failed to watch: connection refused reflector=\"pkg/mcs/informer.go:1\" type=42")
	assert.Contains(t, out, "[INFO] plugin/mcs: with values odd=\"(MISSING)\" k=\"v\"")

	// And klog itself (client-go's calls) goes there.
	klog.ErrorS(errors.New("gone"), "Failed to list", "resource", "endpointslices")
	assert.Contains(t, buf.String(), "[ERROR] plugin/mcs: Failed to list: gone resource=\"endpointslices\"")
}
