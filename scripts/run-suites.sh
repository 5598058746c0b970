#!/usr/bin/env bash
# run-suites.sh PYTEST LOGDIR [all|quick]: the suites that need real services, side by side in five
# pytest processes (a SparkSession, MinIO and PostgreSQL each, and one broker for all of them:
# tests/services.py, tests/shared_broker.py; Airflow and Dagster each configure their framework on
# import, so they cannot share a process): the integration suite in two xdist workers (whole files per
# worker, so a file's fixtures start once), the Airflow suite then the fault suite, the Dagster suite
# then the object-storage suite, the conformance suite (the engine against real Flink) and the
# monitoring suite. On 2 cores one suite alone leaves a core idle while a JVM starts or a test waits.
# Each suite's output goes to LOGDIR/<suite>.log; its slowest tests and summary are printed at the
# end, and the whole log when it failed. Exits non-zero when any suite failed.
# quick (make test-quick): a slice of each with real components, the same way (see CONTRIBUTING.md).
set -uo pipefail
# Four suites side by side start a dozen Spark drivers: each suite's own session (2 GB heaps, set in
# tests/jvm.py) and the runs tests start as processes (CLI runs, spark-submit, demos), whose heap this
# sets: their jobs are small (5 million records run in a 1 GB heap: make bench's memory table). With
# 3 GB heaps everywhere the kernel's OOM killer ended a suite's JVM mid-run (24 GiB, no swap).
export SPARK_DRIVER_MEMORY=${SPARK_DRIVER_MEMORY:-1g}
pytest=$1
logs=$2
tier=${3:-all}
mkdir -p "$logs"
# the cost table (tests/costs.py, scripts/test_costs.py): each pytest process writes where its time went
# (make test empties the folder first, and its unit and chart tests write there too)
export UKO_TEST_COSTS=${UKO_TEST_COSTS:-$logs/costs}
mkdir -p "$UKO_TEST_COSTS"
machine_cpu() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
cpu_before=$(machine_cpu)
began=$(date +%s)
# memory bounds the suites as much as the cores do (no swap: the OOM killer ends a JVM mid-test), so
# the lowest available memory seen while they run goes into the cost table too
lowest="$UKO_TEST_COSTS/lowest-available-mb"
awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo >"$lowest"
(while sleep 2; do
  now=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
  [ "$now" -lt "$(cat "$lowest")" ] && echo "$now" >"$lowest"
done) &
watcher=$!
# one broker for the suites' processes (tests/shared_broker.py: each broker a suite started was a JVM
# start and about 0.7 CPU s a minute idle); the fault and monitoring suites keep their own
python="$(dirname "$pytest")/python"
shared="$logs/shared-broker"
rm -rf "$shared" && mkdir -p "$shared"
"$python" -m tests.shared_broker "$shared" >"$shared/runner.log" 2>&1 &
broker=$!
trap 'kill "$watcher" "$broker" 2>/dev/null; wait "$broker" 2>/dev/null' EXIT  # neither outlives this script
for _ in $(seq 600); do
  [ -f "$shared/state.json" ] || ! kill -0 "$broker" 2>/dev/null && break
  sleep 0.2
done
if [ ! -f "$shared/state.json" ]; then
  echo "the suites' shared broker did not start ($shared/runner.log):"
  cat "$shared/runner.log"
  exit 1
fi
export UKO_TEST_KAFKA="$shared/state.json"

declare -A cmd=(
  [integration]="$pytest tests/integration -n 2 --dist loadfile --durations=15"
  # the fault suite (the broker restarted under running jobs, about 5 minutes beside the others)
  # follows the Airflow suite in its pytest process, on its SparkSession (tests/services.py)
  [airflow]="$pytest tests/airflow tests/faults --durations=5"
  # the object-storage suite (tables on a real S3 server and PostgreSQL, about 13 minutes) follows the
  # Dagster suite in its pytest process, on its broker, SparkSession, MinIO and PostgreSQL
  [dagster]="$pytest tests/dagster tests/storage --durations=5"
  [conformance]="$pytest tests/conformance --durations=5"
  # the monitoring suite in a slot of its own from the start: a real Prometheus over jobs on a
  # one-minute schedule mostly waits for the minutes to pass (541 s and 122 CPU s in a CI run), and
  # after the Dagster suite it made that slot the last to end
  [monitoring]="$pytest tests/monitoring --durations=5"
)
# the inner loop's slice: the engine against its oracle, an Iceberg and a PostgreSQL job killed at a
# fault point and rerun, one Airflow dag.test() and one Dagster materialization
quick_integration="tests/integration/test_engine_oracle.py
  tests/integration/test_jobs_faults.py::test_a_run_killed_at_a_fault_point_is_repaired_by_the_rerun[iceberg-after-commit-incremental]
  tests/integration/test_jobs_faults.py::test_a_run_killed_at_a_fault_point_is_repaired_by_the_rerun[postgres-in-transaction-incremental]"
declare -A quick=(
  [integration]="$pytest $(echo $quick_integration) --durations=5"
  [airflow]="$pytest tests/airflow/test_dags.py::test_pipeline_dag_runs_every_job_in_order --durations=5"
  [dagster]="$pytest tests/dagster/test_assets.py --durations=5"
)
suites=(integration conformance airflow dagster monitoring)
if [ "$tier" = quick ]; then
  suites=(integration airflow dagster)
  for suite in "${suites[@]}"; do cmd[$suite]=${quick[$suite]}; done
fi
declare -A pid start
for suite in "${suites[@]}"; do
  start[$suite]=$(date +%s)
  bash -c "${cmd[$suite]}" >"$logs/$suite.log" 2>&1 &
  pid[$suite]=$!
done

rc=0
for suite in "${suites[@]}"; do
  wait "${pid[$suite]}"
  code=$?
  echo
  echo "== $suite tests ($logs/$suite.log)"
  if [ "$code" -ne 0 ]; then
    cat "$logs/$suite.log"
    rc=1
  else
    sed -n '/slowest .* durations/,$p' "$logs/$suite.log"
  fi
  echo "== phase '$suite tests': $(( $(date +%s) - ${start[$suite]} ))s (exit $code)"
done
kill "$watcher" "$broker" 2>/dev/null
wait "$watcher" "$broker" 2>/dev/null  # the broker's runner writes its cost row as it stops
echo "{\"cpu_s\": $(( ($(machine_cpu) - cpu_before) / $(getconf CLK_TCK) )), \"wall_s\": $(( $(date +%s) - began )), \"cores\": $(nproc), \"memory_mb\": $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo), \"lowest_available_mb\": $(cat "$lowest")}" >"$UKO_TEST_COSTS/machine.json"
rm -f "$lowest"
echo
"$python" scripts/test_costs.py "$UKO_TEST_COSTS" --top 15 || rc=1
exit $rc
