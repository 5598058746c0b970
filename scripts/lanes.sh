#!/usr/bin/env bash
# lanes.sh PIP_VERSION UV_VERSION EXTRAS [LANE...]: the supported Spark lines other than the default,
# each in its own virtualenv installed from its constraints file (constraints/<lane>.txt) with the
# Python it names: the unit tests, then the tests marked `lines` (the engine against its plain-Python
# oracle on randomized topics, the Flink conformance group's random topics, a Delta, an Iceberg and a
# PostgreSQL run killed and rerun, and a spark-submit run) on that line's Spark, its jars resolved for
# it. The installs and jar fetches go one lane after another (Maven's local repository takes one
# writer), then the lanes' tests run side by side: one lane alone keeps about 1.2 of the 2 cores busy
# (225 CPU s over 194 s: its driver waits on Flink, the broker and its CLI runs). Every lane runs even
# when one fails; each one's output goes to build/test-logs/lanes/<lane>.log, its summary to stdout.
# make lanes runs it after make test (the Flink oracle's virtualenv and the jar cache exist then).
set -uo pipefail
cd "$(dirname "$0")/.."
pip_version=$1 uv_version=$2 extras=$3
shift 3
lanes=("$@")
[ ${#lanes[@]} -gt 0 ] || lanes=(spark-3.5-py3.11 spark-4.0-py3.12)
logs=build/test-logs/lanes
mkdir -p "$logs"

. scripts/find-python.sh  # find_python 3.X

prepare_lane() {
  local lane=$1 py venv python began
  py=${lane##*-py}
  venv=.venv-lanes/$lane
  python=$(find_python "$py") || return 1
  began=$(date +%s)
  if [ ! -f "$venv/.installed-stamp" ] || [ "constraints/$lane.txt" -nt "$venv/.installed-stamp" ] ||
    [ pyproject.toml -nt "$venv/.installed-stamp" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv" &&
      "$venv/bin/pip" install -q "pip==$pip_version" "uv==$uv_version" &&
      "$venv/bin/uv" pip install -q --python "$venv/bin/python" -c "constraints/$lane.txt" -e ".[$extras]" &&
      touch "$venv/.installed-stamp" || return 1
  fi
  echo "== lane $lane: installed in $(($(date +%s) - began))s ($("$venv/bin/upsert-kafka-ops" --version | tr '\n' ' '))"
  # the lane's few CLI runs start faster without training a class archive first (about 30 CPU s)
  UPSERT_KAFKA_OPS_CLASS_ARCHIVE=off "$venv/bin/upsert-kafka-ops" jars fetch --group kafka --group spark \
    --group iceberg --group flink
}

test_lane() {
  local lane=$1 venv=.venv-lanes/$1 began
  began=$(date +%s)
  export UPSERT_KAFKA_OPS_CLASS_ARCHIVE=off UKO_LANE=$lane
  "$venv/bin/pytest" tests/unit -q -p no:cacheprovider || return 1
  "$venv/bin/pytest" tests/integration tests/conformance -m lines -p no:cacheprovider --durations=8 || return 1
  echo "== lane $lane: passed in $(($(date +%s) - began))s (its tests, beside the other lanes')"
}

report() {
  local lane=$1 ok=$2
  if [ "$ok" -eq 0 ]; then
    grep -E "^== lane|passed|failed" "$logs/$lane.log" | tail -5
  else
    echo "== lane $lane FAILED ($logs/$lane.log):"
    tail -80 "$logs/$lane.log"
  fi
}

rc=0
declare -A pid prepared
for lane in "${lanes[@]}"; do
  prepare_lane "$lane" >"$logs/$lane.log" 2>&1
  prepared[$lane]=$?
done
for lane in "${lanes[@]}"; do
  if [ "${prepared[$lane]}" -eq 0 ]; then
    test_lane "$lane" >>"$logs/$lane.log" 2>&1 &
    pid[$lane]=$!
  fi
done
for lane in "${lanes[@]}"; do
  code=${prepared[$lane]}
  [ "$code" -ne 0 ] || { wait "${pid[$lane]}"; code=$?; }
  [ "$code" -eq 0 ] || rc=1
  report "$lane" "$code"
done
exit $rc
