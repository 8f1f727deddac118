// Package memberconn is how mcs-dns's programs reach a member cluster's
// API server: which kubeconfig context (LoadKubeconfig), how a client
// rides out the server being away or still starting (RideOutages, with a
// Policy per program: the plugin keeps its answers' staleness, the
// importer lets its health probe see a member go), and which cluster the
// server belongs to (ReadClusterID, the About API ClusterProperty).
//
// A cluster ID is checked with one rule, mcsapi.ValidateClusterID, by
// every program and for every source (the ClusterProperty, a context name
// the importer falls back to, the plugin's cluster_id, the export
// policy's cluster keys): a lower-case RFC 1123 DNS subdomain, as KEP-2149
// asks of cluster.clusterset.k8s.io (the MCS DNS names let an ID span
// several labels), of at most 63 characters, since every mirrored
// EndpointSlice carries the ID as a label value. A looser rule in one
// program would let the importer write slices the plugin cannot answer
// for, or the API server refuse them.
package memberconn
