// Package slicedigest keeps what the importer needs of the EndpointSlices
// it mirrors: a digest of their endpoints in place of the endpoints, so
// that its caches of every member's slices do not grow with every
// endpoint.
package slicedigest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Annotation holds, on the importer's in-memory copies of mirrored
// slices, the digest of their endpoints. It is never written to an API
// server (ForWrite takes it off): the copies the importer keeps of
// what it wrote drop the endpoints and keep only this digest, which is all
// it needs to decide whether a slice is up to date, so its memory does not
// grow with every member's copy of every endpoint.
const Annotation = "mcs-importer.mcs-dns.io/cached-endpoints-digest"

// digestLen is the number of bytes of the SHA-256 kept (128 bits: two
// different endpoint lists never meet the same digest in practice).
const digestLen = 16

// Of is a digest of s's endpoints that two slices share exactly when
// their endpoints are semantically equal (an empty list of
// addresses and none are the same): the one recorded in Annotation,
// or else computed from the endpoints.
func Of(s *discoveryv1.EndpointSlice) string {
	if d, ok := s.Annotations[Annotation]; ok {
		return d
	}
	return digestEndpoints(s.Endpoints)
}

// digestEndpoints hashes the JSON of each endpoint: JSON leaves out empty
// optional fields, as semantic equality ignores the difference between
// an empty list and none; addresses, the one list it does not leave out,
// are made nil when empty.
func digestEndpoints(eps []discoveryv1.Endpoint) string {
	if len(eps) == 0 {
		return ""
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, e := range eps {
		if len(e.Addresses) == 0 {
			e.Addresses = nil // e is a copy
		}
		if err := enc.Encode(e); err != nil {
			// An Endpoint always encodes; should it not, no digest
			// matches this one and the slice is written.
			return "unencodable"
		}
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:digestLen])
}

// Stamp records s's digest on s (which the caller owns), so
// that comparing it against many members' copies hashes it once.
func Stamp(s *discoveryv1.EndpointSlice) {
	d := digestEndpoints(s.Endpoints)
	s.Annotations = maps.Clone(s.Annotations)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[Annotation] = d
}

// Slim is s without its endpoints, their digest recorded instead: what
// the importer keeps of a mirrored slice. s itself is not changed.
func Slim(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if _, ok := s.Annotations[Annotation]; ok && s.Endpoints == nil {
		return s
	}
	out := *s
	Stamp(&out)
	out.Endpoints = nil
	return &out
}

// ForWrite is s as it may be sent to an API server: without
// Annotation (s itself when it has none; else a shallow copy).
func ForWrite(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if _, ok := s.Annotations[Annotation]; !ok {
		return s
	}
	out := *s
	out.Annotations = maps.Clone(s.Annotations)
	delete(out.Annotations, Annotation)
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return &out
}
