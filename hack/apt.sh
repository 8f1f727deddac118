#!/usr/bin/env bash
# Installs, when missing, the Debian packages the demo, the benchmarks and
# the conformance run use (`make apt`); `make test` needs none of them.
set -euo pipefail
log() { printf '==> %s\n' "$*" >&2; }

# Debian packages: dig (and nslookup) for the demo and the conformance run,
# dnsperf for `make bench`. Installed only when missing.
missing=()
command -v dig >/dev/null 2>&1 || missing+=(bind9-dnsutils)
command -v dnsperf >/dev/null 2>&1 || missing+=(dnsperf)
if [ ${#missing[@]} -gt 0 ]; then
	if [ "${MCS_DNS_SKIP_APT:-}" = 1 ]; then
		log "skipping apt (MCS_DNS_SKIP_APT=1); missing: ${missing[*]}"
	else
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		log "installing Debian packages: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
			{ $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
	fi
else
	log "dig and dnsperf: present"
fi
