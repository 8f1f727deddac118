package memberconn

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The kubeconfig is read the one way the plugin, the importer and kubectl
// mcs all do: an explicit path, or else the default loading rules
// ($KUBECONFIG, ~/.kube/config); a named context, or else the file's
// current-context, never client-go's silent fallback to an empty
// configuration (which would talk to localhost:8080).

func loader(path, context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
}

// KubeconfigName is how messages name the kubeconfig at path.
func KubeconfigName(path string) string {
	if path == "" {
		return "($KUBECONFIG or ~/.kube/config)"
	}
	return path
}

// ErrNoContext: no context was named and the file has no current-context.
var ErrNoContext = errors.New("no context named and no current-context")

// LoadKubeconfig returns the REST configuration of context (the
// current-context when empty) of the kubeconfig at path (the default
// loading rules when empty).
func LoadKubeconfig(path, context string) (*rest.Config, error) {
	l := loader(path, context)
	if context == "" {
		raw, err := l.RawConfig()
		if err == nil && raw.CurrentContext == "" {
			// client-go would say "no configuration has been provided".
			return nil, fmt.Errorf("kubeconfig %s: %w: name the context", KubeconfigName(path), ErrNoContext)
		}
	}
	cfg, err := l.ClientConfig()
	if err != nil {
		if context != "" {
			return nil, fmt.Errorf("kubeconfig %s, context %q: %w", KubeconfigName(path), context, err)
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", KubeconfigName(path), err)
	}
	return cfg, nil
}

// RawKubeconfig reads the kubeconfig at path (the default loading rules
// when empty) as it is: its contexts, clusters and users.
func RawKubeconfig(path string) (*clientcmdapi.Config, error) {
	raw, err := loader(path, "").RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", KubeconfigName(path), err)
	}
	return &raw, nil
}
