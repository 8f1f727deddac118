package mcs

import (
	"context"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
)

// importClient reads ServiceImports of one served version into
// listwatchjson.ServiceImport: typed metadata, raw spec and status. (The dynamic
// client's Unstructured decoding was most of the CPU of the one goroutine
// reading the ServiceImport watch, the critical path of start-up.)
type importClient struct {
	rest     rest.Interface
	params   kruntime.ParameterCodec
	resource string
}

func newImportClient(cfg *rest.Config, gvr schema.GroupVersionResource) (*importClient, error) {
	gv := gvr.GroupVersion()
	sch := kruntime.NewScheme()
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImport"), &listwatchjson.ServiceImport{})
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImportList"), &listwatchjson.ServiceImportList{})
	metav1.AddToGroupVersion(sch, gv)
	rc := rest.CopyConfig(cfg)
	rc.GroupVersion = &gv
	rc.APIPath = "/apis"
	rc.ContentType = kruntime.ContentTypeJSON
	rc.AcceptContentTypes = kruntime.ContentTypeJSON
	rc.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	// No client-side limit: this client only lists and watches (a few
	// requests per namespace scope, and per reconnect), and Request.Stream,
	// unlike Request.Watch, would wait on it: with many namespace scopes
	// start-up would queue behind the default 5/s.
	rc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	client, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, err
	}
	return &importClient{rest: client, params: kruntime.NewParameterCodec(sch), resource: gvr.Resource}, nil
}

// listWatch lists and watches the ServiceImports of namespace ns ("": all).
// Responses are decoded straight from the body by listwatchjson's decoders
// (one scan and one decode per object, instead of client-go's generic
// framing, kind sniffing and envelope decoding); Stream turns non-2xx
// responses into API errors as Do and Watch do.
func (ic *importClient) listWatch(ns string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			body, err := ic.rest.Get().Namespace(ns).Resource(ic.resource).VersionedParams(&o, ic.params).Stream(ctx)
			if err != nil {
				return nil, err
			}
			defer func() {
				// Read to the end, so that an HTTP/1.1 connection is reused.
				_, _ = io.Copy(io.Discard, body)
				_ = body.Close()
			}()
			return listwatchjson.DecodeList(body)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			body, err := ic.rest.Get().Namespace(ns).Resource(ic.resource).VersionedParams(&o, ic.params).Stream(ctx)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(listwatchjson.NewWatchDecoder(body),
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
		},
	}
}
