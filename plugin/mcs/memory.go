package mcs

import "runtime/debug"

// releaseListGarbage returns the heap freed since the initial lists to
// the OS. Decoding the lists left garbage several times the size of what
// is kept; without this it stays resident until the scavenger gets to
// it. Queries allocate nothing, so the heap stays near its live size
// afterwards.
func releaseListGarbage() { debug.FreeOSMemory() }
