#!/usr/bin/env bash
# timed.sh LABEL CMD...: run CMD and print how long it took, keeping its exit code.
set -uo pipefail
label=$1; shift
start=$(date +%s)
"$@"
rc=$?
echo "== phase '${label}': $(( $(date +%s) - start ))s (exit ${rc})"
exit $rc
