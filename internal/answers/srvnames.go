package answers

import (
	"slices"
)

// The SRV names of a service's named ports.

// portGroup is the named ports of one SRV name.
type portGroup struct {
	rel   string // "_http._tcp"
	proto string // "_tcp"
	ports []uint16
}

// namedPorts groups the named ports by SRV name "_<name>._<proto>", in a
// stable order, without duplicate port numbers per name.
func namedPorts(ports []Port) []portGroup {
	var groups []portGroup
	for _, p := range ports {
		if p.Name == "" || p.Protocol == "" {
			continue
		}
		rel := "_" + p.Name + "._" + p.Protocol
		i := slices.IndexFunc(groups, func(g portGroup) bool { return g.rel == rel })
		if i < 0 {
			groups = append(groups, portGroup{rel: rel, proto: rel[len(p.Name)+2:]})
			i = len(groups) - 1
		}
		if !slices.Contains(groups[i].ports, p.Port) {
			groups[i].ports = append(groups[i].ports, p.Port)
		}
	}
	return groups
}

// srvNamesFit keeps the groups whose SRV owner name
// "_<port>._<proto>.<svcRel>.<zone>" is a valid DNS name in every zone: its
// label "_<port>" at most 63 octets (a port name may have 63 characters, a
// DNS label as Service port names are, and the underscore makes 64), the
// whole name at most RFC 1035's 255 octets (a long port name with a long
// service, namespace and zone can exceed it). Such a port keeps its place
// in the bare-name SRV answer (its number needs no name); only its own SRV
// name is left out.
func srvNamesFit(groups []portGroup, svcRel string, zones []string) []portGroup {
	longest := 0
	for _, z := range zones {
		if z != "." {
			longest = max(longest, len(z))
		}
	}
	return slices.DeleteFunc(groups, func(g portGroup) bool {
		label := len(g.rel) - len(g.proto) - 1 // "_<port>"
		// Presentation with the trailing dot, plus one: the wire length.
		return label > 63 || len(g.rel)+1+len(svcRel)+1+longest+1 > 255
	})
}

// distinctPorts returns the distinct port numbers of the named ports: a
// bare-name SRV answers one record per distinct (target, port). With one
// group, that group's own slice.
func distinctPorts(groups []portGroup) []uint16 {
	if len(groups) == 1 {
		return groups[0].ports
	}
	var out []uint16
	for _, g := range groups {
		for _, p := range g.ports {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
