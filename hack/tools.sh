#!/usr/bin/env bash
# Builds (once) the real kube-apiserver, kube-controller-manager, etcd and
# kwok the tests, the demo and the conformance run use, the real kubectl
# the plugin's test runs `kubectl mcs` with, and staticcheck.
# Everything comes from the Go module proxy; a second run does nothing.
set -euo pipefail
# The Debian packages (dig, nslookup, dnsperf) are hack/apt.sh's job;
# `make test` needs none of them.

root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=${K8S_VERSION:-1.37.2}
default_dest=$root/.cache/k8s/$K8S_VERSION
dest=${MCS_DNS_K8S_ASSETS:-$default_dest}
tools_module=$root/hack/tools/k8s

log() { printf '==> %s\n' "$*" >&2; }

# The version is read whole before grep looks at it: with pipefail, grep -q
# quitting at the first match could SIGPIPE the binary mid-output, fail the
# pipeline, and rebuild a binary that is there.
have_apiserver() {
	local v
	[ -x "$dest/kube-apiserver" ] && v=$("$dest/kube-apiserver" --version 2>/dev/null) && grep -qx "Kubernetes v$K8S_VERSION" <<<"$v"
}
have_etcd() {
	local v
	[ -x "$dest/etcd" ] && v=$("$dest/etcd" --version 2>/dev/null) && grep -q '^etcd Version: 3\.7\.' <<<"$v"
}

have_controller_manager() {
	local v
	[ -x "$dest/kube-controller-manager" ] && v=$("$dest/kube-controller-manager" --version 2>/dev/null) && grep -qx "Kubernetes v$K8S_VERSION" <<<"$v"
}
have_kwok() {
	local v
	[ -x "$dest/kwok" ] && v=$("$dest/kwok" --version 2>/dev/null) && grep -q "$KWOK_VERSION" <<<"$v"
}
KWOK_VERSION=v0.8.0
# kubectl --version is not a flag: `kubectl version --client` prints
# "Client Version: v1.37.2" (and a Kustomize line) without a server.
have_kubectl() {
	local v
	[ -x "$dest/kubectl" ] && v=$("$dest/kubectl" version --client 2>/dev/null) && grep -qx "Client Version: v$K8S_VERSION" <<<"$v"
}

build() { # build <package> <binary> [ldflags] [module folder]
	local pkg=$1 bin=$2 ldflags=${3:-} module=${4:-$tools_module}
	mkdir -p "$dest"
	# Build to a temporary name and rename, so an interrupted build never
	# leaves a half-written binary that a later run would take for done.
	(cd "$module" && go build -trimpath -ldflags "$ldflags" -o "$dest/.$bin.tmp" "$pkg")
	mv "$dest/.$bin.tmp" "$dest/$bin"
}

k8s_ldflags="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
k8s_ldflags="$k8s_ldflags -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*}"
minor=${K8S_VERSION#*.}; minor=${minor%%.*}
k8s_ldflags="$k8s_ldflags -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

if [ "$dest" != "$default_dest" ]; then
	# A folder of the user's own (MCS_DNS_K8S_ASSETS): use what is there,
	# never build into it.
	for bin in kube-apiserver etcd; do
		if [ ! -x "$dest/$bin" ]; then
			log "MCS_DNS_K8S_ASSETS=$dest has no executable $bin: put kube-apiserver and etcd there, or unset it to build them into $default_dest"
			exit 1
		fi
	done
	log "using your kube-apiserver ($("$dest/kube-apiserver" --version 2>/dev/null || echo '?')) and etcd ($("$dest/etcd" --version 2>/dev/null | head -1 || echo '?')) in $dest; the tests are written against v$K8S_VERSION and etcd 3.7"
elif have_apiserver; then
	log "kube-apiserver v$K8S_VERSION: present in $dest"
else
	log "building kube-apiserver v$K8S_VERSION from source (first time: 4-10 minutes on 2 cores, ~3 GB of Go build cache)"
	build k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$k8s_ldflags"
fi

# The control plane of a member with real controllers and simulated nodes
# (test/cluster's Spec.ControlPlane: the demo and `make conformance`).
if [ "$dest" != "$default_dest" ]; then
	for bin in kube-controller-manager kwok; do
		[ -x "$dest/$bin" ] || log "MCS_DNS_K8S_ASSETS=$dest has no $bin: the demo and the conformance run need it"
	done
else
	if have_controller_manager; then
		log "kube-controller-manager v$K8S_VERSION: present in $dest"
	else
		log "building kube-controller-manager v$K8S_VERSION from source (first time: 3-8 minutes on 2 cores)"
		build k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$k8s_ldflags"
	fi
	if have_kwok; then
		log "kwok $KWOK_VERSION: present in $dest"
	else
		log "building kwok $KWOK_VERSION from source (first time: about two minutes)"
		build sigs.k8s.io/kwok/cmd/kwok kwok "" "$root/hack/tools/kwok"
	fi
	if [ ! -s "$dest/kwok-stages.yaml" ]; then
		# kwok's own "fast" stages: Nodes Ready with a heartbeat,
		# Pods Running and Ready at once, deleted Pods gone.
		kwok_dir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
		for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
			f=$kwok_dir/kustomize/stage/$f
			echo "---"
			cat "$f"
		done >"$dest/.kwok-stages.yaml.tmp"
		mv "$dest/.kwok-stages.yaml.tmp" "$dest/kwok-stages.yaml"
	fi
fi

# kubectl, for the one test that runs `kubectl mcs` through kubectl
# itself. In a folder of the user's own a missing kubectl fails nothing:
# that test skips, saying so, and every other test runs.
if [ "$dest" != "$default_dest" ]; then
	[ -x "$dest/kubectl" ] || log "MCS_DNS_K8S_ASSETS=$dest has no kubectl: the test that runs \`kubectl mcs\` through it skips"
elif have_kubectl; then
	log "kubectl v$K8S_VERSION: present in $dest"
else
	log "building kubectl v$K8S_VERSION from source (first time: 2-4 minutes on 2 cores)"
	build k8s.io/kubernetes/cmd/kubectl kubectl "$k8s_ldflags"
fi

if [ "$dest" != "$default_dest" ]; then
	:
elif have_etcd; then
	log "etcd v3.7: present in $dest"
else
	log "building etcd v3.7 from source (first time: about a minute)"
	build go.etcd.io/etcd/server/v3 etcd
fi

# staticcheck for `make lint`, pinned.
STATICCHECK_VERSION=v0.8.2
tools_bin=$root/.cache/tools
if [ -x "$tools_bin/staticcheck" ] && "$tools_bin/staticcheck" -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
	log "staticcheck $STATICCHECK_VERSION: present in $tools_bin"
else
	log "installing staticcheck $STATICCHECK_VERSION into $tools_bin"
	GOBIN=$tools_bin go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
