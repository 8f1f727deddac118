package mcs

import (
	"fmt"
	"strings"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// init sends client-go's own log lines (reflector errors, watch
// restarts, throttling) through CoreDNS's log with the plugin's prefix,
// instead of klog's format on stderr; verbosity stays klog's to decide.
// At init, before any goroutine: klog.SetLogger must not run while
// informers log (a reload's setup runs while the old instance's do).
func init() {
	klog.SetLogger(logr.New(klogSink{p: log}))
}

// klogSink is a logr.LogSink writing to a CoreDNS plugin logger.
type klogSink struct {
	p clog.P
	// kv are the key/value pairs WithValues added, in pairs.
	kv []any
}

func (klogSink) Init(logr.RuntimeInfo) {}

// Enabled: klog filters by verbosity before the sink is asked.
func (klogSink) Enabled(int) bool { return true }

func (s klogSink) Info(_ int, msg string, kv ...any) { s.p.Info(s.line(msg, nil, kv)) }

func (s klogSink) Error(err error, msg string, kv ...any) { s.p.Error(s.line(msg, err, kv)) }

func (s klogSink) WithValues(kv ...any) logr.LogSink {
	s.kv = append(append([]any(nil), s.kv...), kv...)
	if len(s.kv)%2 == 1 {
		s.kv = append(s.kv, "(MISSING)")
	}
	return s
}

func (s klogSink) WithName(string) logr.LogSink { return s }

// line is msg, the error and the key/value pairs, as key="value".
// client-go puts most of what a line is about (the resource, the
// reflector) in the pairs.
func (s klogSink) line(msg string, err error, kv []any) string {
	var b strings.Builder
	b.WriteString(msg)
	if err != nil {
		b.WriteString(": ")
		b.WriteString(err.Error())
	}
	all := append(append([]any(nil), s.kv...), kv...)
	for i := 0; i < len(all); i += 2 {
		var v any = "(MISSING)"
		if i+1 < len(all) {
			v = all[i+1]
		}
		if e, ok := v.(error); ok {
			v = e.Error()
		}
		if str, ok := v.(string); ok {
			fmt.Fprintf(&b, " %v=%q", all[i], str)
		} else {
			fmt.Fprintf(&b, " %v=%v", all[i], v)
		}
	}
	return b.String()
}
