#!/usr/bin/env bash
# Stops the processes a run of this checkout started and left behind (a Go
# test that panics on -timeout exits without running t.Cleanup, so the
# kube-apiserver, etcd, kube-controller-manager, kwok, CoreDNS and importers
# it started would live on).
#
# Every `make test`, `make demo`, `make bench` and `make conformance` runs
# with MCS_DNS_RUN_ID set to a fresh random ID, recorded in .cache/runs/;
# every process they start inherits it. This script stops exactly the
# processes whose environment carries the ID of a run (MCS_DNS_RUN_ID if
# set, else every run recorded in this checkout), never by name or path, so
# another checkout's or another user's processes are never touched. Its own
# ancestors (make, .ci/run) are spared.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=$root/.cache/runs

ids=()
if [ -n "${MCS_DNS_RUN_ID:-}" ]; then
	ids=("$MCS_DNS_RUN_ID")
elif [ -d "$runs" ]; then
	for f in "$runs"/*; do
		[ -e "$f" ] && ids+=("$(basename "$f")")
	done
fi
[ ${#ids[@]} -gt 0 ] || exit 0

# This shell and its ancestors carry the ID too: spare them.
declare -A spare=()
pid=$$
while [ -n "$pid" ] && [ "$pid" -gt 1 ] 2>/dev/null; do
	spare[$pid]=1
	pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
done

find_pids() {
	local env p id
	for env in /proc/[0-9]*/environ; do
		p=${env#/proc/}
		p=${p%/environ}
		[ -n "${spare[$p]:-}" ] && continue
		for id in "${ids[@]}"; do
			if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "MCS_DNS_RUN_ID=$id"; then
				echo "$p"
				break
			fi
		done
	done
}

pids=$(find_pids)
if [ -n "$pids" ]; then
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null || true
	sleep 2
	pids=$(find_pids)
	# shellcheck disable=SC2086
	[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
fi
# A run whose processes are all gone needs no record.
if [ -z "${MCS_DNS_RUN_ID:-}" ] || [ -z "$(find_pids)" ]; then
	for id in "${ids[@]}"; do
		rm -f "$runs/$id"
	done
fi
exit 0
