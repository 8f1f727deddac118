package members

import "k8s.io/client-go/tools/cache"

// Handler is handler without own writes, for the tests of package
// members_test (which may import what imports members, such as
// importer/vip).
func Handler(m *Member, kind Kind, notify func(Event)) cache.ResourceEventHandler {
	return handler(m, kind, nil, notify, nil, nil)
}

// Impersonated is impersonated, for the external tests.
var Impersonated = impersonated
