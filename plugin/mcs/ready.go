package mcs

// Ready implements the ready.Readiness interface: false until the
// ServiceImport and EndpointSlice informers have synced and their initial
// objects are answered. It stays true while the API server is unreachable:
// the last good answers keep being served.
func (p *MCS) Ready() bool { return p.synced() }
