package mcs

import (
	"context"
	"reflect"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// Which writers a reply written as bytes may go through. Writing bytes
// (dns.ResponseWriter.Write) is CoreDNS's exported API, but whether they
// reach the client as they are, and are counted, depends on every writer
// between mcs and the server:
//
//   - request.ScrubWriter, the server's own: Write passes bytes on (it
//     fits only messages given to WriteMsg; the replies fit already).
//   - metrics.Recorder, the prometheus plugin's: Write counts the length;
//     the rcode the plugin reports is the exported field Recorder.Rcode,
//     which only WriteMsg sets, so a negative reply sets it (setRcode).
//   - the writer plugin.NextOrFailure wraps around every writer it passes
//     on (to note which plugin wrote the reply): Write passes bytes on.
//     Its type is unexported and CoreDNS has no exported way to reach the
//     writer inside it, yet every Corefile has plugins before mcs (errors,
//     prometheus, ...): without looking through it the fast path would
//     never run. So this one assumption on CoreDNS internals stays: the
//     type is learnt by calling NextOrFailure and the inner writer read by
//     reflection from its exported embedded field ResponseWriter. If a CoreDNS upgrade
//     changes either, inner finds nothing and replies take the dns.Msg
//     path (slower, never wrong), and TestCoreDNSAssumptions fails saying
//     what to re-check.
//   - any other writer (cache, log, dnstap, rewrite, ... need the
//     *dns.Msg), and dnsserver.DoQWriter, which ends a QUIC stream in
//     WriteMsg only: the dns.Msg path.

// pluginWriterType is the type of the writer plugin.NextOrFailure wraps
// around the writer it passes on (to note which plugin wrote the reply;
// its Write passes the bytes on unchanged), and pluginWriterField the
// index of its embedded field ResponseWriter, the writer it wraps. The
// type is unexported, so it is learnt once by calling NextOrFailure; nil
// (and the fast path off behind any plugin) when NextOrFailure stops
// wrapping or the type no longer has that shape.
var pluginWriterType, pluginWriterField = func() (reflect.Type, int) {
	var seen reflect.Type
	_, _ = plugin.NextOrFailure("mcs", plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, _ *dns.Msg) (int, error) {
		seen = reflect.TypeOf(w)
		return 0, nil
	}), context.Background(), &request.ScrubWriter{}, nil)
	if seen == nil || seen.Kind() != reflect.Pointer || seen.Elem().Kind() != reflect.Struct {
		return nil, -1
	}
	f, ok := seen.Elem().FieldByName("ResponseWriter")
	if !ok || !f.IsExported() || len(f.Index) != 1 || f.Type != reflect.TypeFor[dns.ResponseWriter]() {
		return nil, -1
	}
	return seen, f.Index[0]
}()

// maxWrappers bounds the writers rawWriter looks through: one per plugin
// before mcs in the chain, and the prometheus recorder.
const maxWrappers = 32

// inner returns the writer that w wraps when w is one that passes bytes
// written with Write on unchanged (NextOrFailure's, or the prometheus
// plugin's recorder, which counts their length and reads an unset rcode as
// NOERROR), else nil.
func inner(w dns.ResponseWriter) dns.ResponseWriter {
	if t, ok := w.(*metrics.Recorder); ok {
		if t.Recorder == nil {
			return nil
		}
		return t.Recorder.ResponseWriter
	}
	if pluginWriterType != nil && reflect.TypeOf(w) == pluginWriterType {
		if v := reflect.ValueOf(w); !v.IsNil() {
			next, _ := v.Elem().Field(pluginWriterField).Interface().(dns.ResponseWriter)
			return next
		}
	}
	return nil
}

// rawWriter reports whether a reply written with Write reaches the client
// unchanged and fully accounted for: the server's own ScrubWriter (it only
// fits messages given to WriteMsg; our templates fit already), possibly
// behind writers that pass bytes on (see inner). Not for DNS over QUIC:
// its writer ends the stream in WriteMsg only.
func rawWriter(w dns.ResponseWriter) bool {
	for range maxWrappers {
		if sw, ok := w.(*request.ScrubWriter); ok {
			_, quic := sw.ResponseWriter.(*dnsserver.DoQWriter)
			return !quic && sw.ResponseWriter != nil
		}
		if w = inner(w); w == nil {
			return false
		}
	}
	return false
}

// setRcode tells the prometheus plugin's recorders the rcode of a reply
// written as bytes (they read it only from messages given to WriteMsg).
func setRcode(w dns.ResponseWriter, rcode int) {
	for range maxWrappers {
		if t, ok := w.(*metrics.Recorder); ok && t.Recorder != nil {
			t.Rcode = rcode
		}
		if w = inner(w); w == nil {
			return
		}
	}
}
