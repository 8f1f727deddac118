// Package importer is mcs-importer: it reads ServiceExports (and the
// Services and EndpointSlices they name) in every member cluster of a
// clusterset and writes the ServiceImports and mirrored EndpointSlices the
// MCS API asks for into the importing clusters, plus the exports'
// conditions. cmd/mcs-importer is a thin main around ParseFlags and Run;
// tests call Run in-process.
//
// Packages: members (clients, cluster IDs, informers, health), aggregate
// (the pure rules), controller (queue, diff and apply), vip (the seam for
// ClusterSet VIPs).
package importer
