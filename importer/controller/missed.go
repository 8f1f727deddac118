package controller

import "sync"

// missedWrites holds, for each member out of reach within its grace
// period (Unreachable), the keys reconciled without writing to it: when
// it is back, those keys are reconciled again, and only those. Its
// caches were kept through the outage, so everything else it holds is
// what the importer last wrote there or came in as an event (a watch
// broken by the outage lists again, and each difference is an event).
// A member that goes Down, or joins again, has every key reconciled.
// Members are named by their kubeconfig context, which stays when a
// member joins again as a new Member.
type missedWrites struct {
	mu   sync.Mutex
	keys map[string]map[string]struct{}
}

// add records that k was reconciled without writing to the member
// reached through context.
func (w *missedWrites) add(context, k string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		w.keys = map[string]map[string]struct{}{}
	}
	ks := w.keys[context]
	if ks == nil {
		ks = map[string]struct{}{}
		w.keys[context] = ks
	}
	ks[k] = struct{}{}
}

// take returns and forgets the keys recorded for context.
func (w *missedWrites) take(context string) map[string]struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ks := w.keys[context]
	delete(w.keys, context)
	return ks
}
