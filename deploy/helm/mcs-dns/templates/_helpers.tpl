{{/*
Labels on every object the chart renders. Selectors use only
app.kubernetes.io/name, as deploy/ does, so that the pods match the same
selectors however they were installed.
*/}}
{{- define "mcs-dns.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcs-dns
{{- end }}

{{/* image renders repository:tag of a component's image values. */}}
{{- define "mcs-dns.image" -}}
{{ .repository }}:{{ .tag }}
{{- end }}

{{/* The namespace of the importer's leader Lease. */}}
{{- define "mcs-dns.leaseNamespace" -}}
{{ .Values.importer.leaderElection.namespace | default .Release.Namespace }}
{{- end }}

{{/*
The importer's member record, which the importer keeps next to its Lease:
<lease name>-members (--member-record's default).
*/}}
{{- define "mcs-dns.memberRecord" -}}
{{ .Values.importer.leaderElection.name | default "mcs-importer" }}-members
{{- end }}

{{/*
topologySpread renders a component's spread constraints; called with
(dict "spread" .topologySpread "name" <app name>).
*/}}
{{- define "mcs-dns.topologySpread" -}}
{{- $name := .name }}
{{- $when := .spread.whenUnsatisfiable }}
{{- range .spread.topologyKeys }}
- maxSkew: 1
  topologyKey: {{ . }}
  whenUnsatisfiable: {{ $when }}
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
{{- end }}
{{- end }}

{{/*
pod scheduling fields shared by both Deployments; called with a
component's values.
*/}}
{{- define "mcs-dns.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The Corefile of our CoreDNS: corefile-examples/production.Corefile with the
values of coredns.corefile.
*/}}
{{- define "mcs-dns.corefile" -}}
{{- with .Values.coredns.corefile }}
{{- if .override }}
{{- .override }}
{{- else }}
{{- $zones := join " " .zones -}}
{{ $zones }} {
    errors {
        consolidate 30s ".*" warning show_first
    }
    bufsize {{ .bufsize }}
    health :8080
    ready :8181
    prometheus :9153
    mcs {{ $zones }} {
        ttl {{ .ttl }}
        {{- if .rotate }}
        rotate
        {{- end }}
        {{- with .endpointsliceManagers }}
        endpointslice_managers {{ join " " . }}
        {{- end }}
        {{- with .clusterID }}
        cluster_id {{ . }}
        {{- end }}
        {{- with .locality }}
        locality {{ . }}
        {{- end }}
        {{- with .namespaces }}
        namespaces {{ join " " . }}
        {{- end }}
        {{- with .maxAnswers }}
        max_answers {{ . }}
        {{- end }}
        {{- with .maxUDPSize }}
        max_udp_size {{ . }}
        {{- end }}
    }
    {{- with .extraPlugins }}
    {{- . | nindent 4 }}
    {{- end }}
}
{{- end }}
{{- end }}
{{- end }}
