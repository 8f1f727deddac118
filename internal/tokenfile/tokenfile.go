// Package tokenfile makes Kubernetes clients read a kubeconfig's token
// file again as soon as the API server refuses the token they sent.
package tokenfile

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// RereadOnRefusal makes the clients of cfg read its token file (a
// kubeconfig's tokenFile, or the in-cluster ServiceAccount token) again
// as soon as the API server refuses the token they sent (401), rather
// than when client-go's copy is a minute old: a token replaced and the
// old one revoked at once then costs one refused request, not a minute
// of them. One token source serves every client made from cfg (and its
// copies), so one refusal renews them all. A cfg without a token file is
// left as it is.
func RereadOnRefusal(cfg *rest.Config) {
	if cfg.BearerTokenFile == "" {
		return
	}
	ts := transport.NewCachedFileTokenSource(cfg.BearerTokenFile)
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(transport.ResettableTokenSourceWrapTransport(ts))
}
