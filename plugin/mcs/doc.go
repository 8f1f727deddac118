// Package mcs is a CoreDNS plugin that answers the Multi-Cluster Services
// zone (clusterset.local) as the MCS DNS specification (KEP-1645, schema
// 1.0.0) says, from ServiceImports and EndpointSlices kept in informer
// caches and turned into precomputed answers on every change. README.md
// says what it answers and how to configure it; this says how.
//
// Replies are sent as bytes where possible: the first query for a name and
// type packs its reply once (with and without the additional section); later
// queries copy it and write the query's ID, flags, question-name case and
// OPT record over it, without building a dns.Msg (0 allocations; negative
// replies with the SOA are built as bytes the same way). This applies when
// the plugins before mcs pass the response writer on unchanged (as plugins
// that only call the next one do) or are prometheus (its recorder counts the
// bytes and is told the rcode), over UDP, TCP, DoT, DoH and gRPC (not DNS
// over QUIC, whose writer ends a stream only for messages), for queries with
// opcode QUERY, class IN, EDNS0 version 0 without an option a plugin
// registered for echoing (a client's COOKIE is fine: neither path echoes it)
// and a name without escapes, and when the packed reply fits the client's
// buffer. Anything else (for example cache, log or dnstap in front, a reply
// that must be truncated) is answered through a dns.Msg with records built
// for that reply, so other plugins may modify them. The question section
// always echoes the query's case (0x20 works); answer owner names do so in
// A, AAAA, SRV and PTR replies sent as bytes, and are lower case otherwise
// (SOA, NS, TXT, ANY, replies built as a dns.Msg): DNS names compare case-
// insensitively (RFC 4343).
//
// Memory: the plugin keeps only what answers need of each object (not the
// objects themselves) and builds every answer once, when objects change.
// Decoding the initial lists makes garbage several times the size of what is
// kept, so until they are in the plugin sets Go's garbage collector target
// to 50 instead of 100 (left alone when GOGC is set), and at sync it
// restores the target and returns the freed memory to the OS. At 100,000
// endpoints in 4,000 EndpointSlices and 22,000 ServiceImports that is about
// 124 MiB resident after sync, 135 MiB at the peak (make bench).
package mcs
