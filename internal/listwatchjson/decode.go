package listwatchjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The ServiceImport watch (and list) read straight from the response body
// into ServiceImports, in one scan and one decode per event. client-go's
// generic path frames each event (a scan), sniffs its kind (a decode),
// validates and decodes the envelope, then sniffs, validates and decodes
// the object inside: about seven passes over every byte, on the one
// goroutine that reads the watch, which at start-up is the critical path
// (the initial events of a 20,000-import cluster). Only the metadata
// fields the informer and the reflector read are decoded (managedFields,
// labels and timestamps are skipped).

// wireObject is what a watch event's object or a list item can hold: a
// ServiceImport, or in an ERROR event a metav1.Status (whose string
// "status" lands in Status as raw JSON).
type wireObject struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   wireMeta `json:"metadata"`
	Spec       rawJSON  `json:"spec"`
	Status     rawJSON  `json:"status"`

	Message string                `json:"message"`
	Reason  metav1.StatusReason   `json:"reason"`
	Code    int32                 `json:"code"`
	Details *metav1.StatusDetails `json:"details"`
}

// wireMeta is the part of metadata anything downstream reads: the keys,
// the resource version (the reflector resumes from it), the UID and the
// annotations (the reflector finds the end of a watch-list's initial
// events in a BOOKMARK's annotations).
type wireMeta struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             types.UID         `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Continue        string            `json:"continue"` // lists and Status
	Annotations     map[string]string `json:"annotations"`
}

type wireEvent struct {
	Type   watch.EventType `json:"type"`
	Object wireObject      `json:"object"`
}

func (o *wireObject) toImport() (*ServiceImport, error) {
	if o.Kind != "ServiceImport" {
		return nil, fmt.Errorf("object of kind %q in the ServiceImport watch", o.Kind)
	}
	return &ServiceImport{
		TypeMeta: metav1.TypeMeta{APIVersion: o.APIVersion, Kind: o.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, UID: o.Metadata.UID,
			ResourceVersion: o.Metadata.ResourceVersion, Annotations: o.Metadata.Annotations,
		},
		Spec:   o.Spec,
		Status: o.Status,
	}, nil
}

func (o *wireObject) toStatus() *metav1.Status {
	// No TypeMeta, as client-go's typed decoding leaves it.
	st := &metav1.Status{
		ListMeta: metav1.ListMeta{ResourceVersion: o.Metadata.ResourceVersion, Continue: o.Metadata.Continue},
		Message:  o.Message, Reason: o.Reason, Code: o.Code, Details: o.Details,
	}
	_ = json.Unmarshal(o.Status, &st.Status) // "Failure"; absent or malformed: ""
	return st
}

// WatchDecoder decodes a ServiceImport watch stream (JSON) into
// ServiceImports; ERROR events carry a *metav1.Status. It implements
// watch.Decoder, for watch.NewStreamWatcher.
type WatchDecoder struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// NewWatchDecoder reads events from body, which Close closes.
func NewWatchDecoder(body io.ReadCloser) *WatchDecoder {
	return &WatchDecoder{body: body, dec: json.NewDecoder(body)}
}

// Decode returns the next event. At the end of the stream it returns
// io.EOF, and io.ErrUnexpectedEOF when the stream ends inside an event; a
// malformed event is an error (the stream watcher reports it and the
// reflector lists again).
func (d *WatchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var ev wireEvent
	if err := d.dec.Decode(&ev); err != nil {
		// Read errors and truncation (io.EOF, io.ErrUnexpectedEOF, a reset
		// connection) go out as they are: the stream watcher recognizes
		// them as a dropped connection, and the reflector then resumes
		// from the last resource version instead of relisting.
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) {
			return "", nil, fmt.Errorf("decoding a ServiceImport watch event: %w", err)
		}
		return "", nil, err
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj, err := ev.Object.toImport()
		if err != nil {
			return "", nil, err
		}
		return ev.Type, obj, nil
	case watch.Error:
		return ev.Type, ev.Object.toStatus(), nil
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %q", ev.Type)
	}
}

// Close closes the body.
func (d *WatchDecoder) Close() { _ = d.body.Close() }

// wireList is a ServiceImportList as it is read.
type wireList struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   wireMeta     `json:"metadata"`
	Items      []wireObject `json:"items"`
}

// DecodeList reads a ServiceImportList (JSON) from r.
func DecodeList(r io.Reader) (*ServiceImportList, error) {
	var l wireList
	if err := json.NewDecoder(r).Decode(&l); err != nil {
		return nil, fmt.Errorf("decoding a ServiceImport list: %w", err)
	}
	if !strings.HasSuffix(l.Kind, "List") {
		return nil, fmt.Errorf("a ServiceImport list of kind %q", l.Kind)
	}
	out := &ServiceImportList{
		TypeMeta: metav1.TypeMeta{APIVersion: l.APIVersion, Kind: l.Kind},
		ListMeta: metav1.ListMeta{ResourceVersion: l.Metadata.ResourceVersion, Continue: l.Metadata.Continue},
		Items:    make([]ServiceImport, len(l.Items)),
	}
	for i := range l.Items {
		it := &l.Items[i]
		if it.Kind == "" { // items of a list may carry no kind
			it.Kind = "ServiceImport"
		}
		if it.APIVersion == "" {
			it.APIVersion = l.APIVersion
		}
		w, err := it.toImport()
		if err != nil {
			return nil, err
		}
		out.Items[i] = *w
	}
	return out, nil
}
