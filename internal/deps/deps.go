package deps

import (
	_ "github.com/coredns/caddy"
	_ "github.com/coredns/coredns/core/plugin"
	_ "github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/pkg/fall"
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/stretchr/testify/require"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "k8s.io/client-go/dynamic/dynamicinformer"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/util/workqueue"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/mcs-api/config/crd"
	_ "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	_ "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	_ "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)
