#!/usr/bin/env bash
# wheel-check.sh PIP_VERSION UV_VERSION: the package as users install it. Builds the sdist and the wheel
# with `python -m build` and checks them with twine; installs the wheel (never the checkout) into clean
# Python 3.13 virtualenvs, one with the airflow extra and one with the dagster extra, from
# constraints/spark-4.1-py3.13.txt; then Airflow's CLI lists the provider and parses this repository's
# DAGs against it, dg loads a project whose defs.yaml uses the Component, and `upsert-kafka-ops demo`
# runs from the installed wheel in an empty folder. On Python 3.10 the wheel with both extras installs
# from constraints/spark-4.1-py3.10.txt and its modules import. Output in build/test-logs/wheel.log.
set -euo pipefail
cd "$(dirname "$0")/.."
pip_version=$1 uv_version=$2
root=$PWD
work=$root/build/wheel-check
rm -rf "$work" && mkdir -p "$work"
BUILD_VERSION=1.6.1
TWINE_VERSION=7.0.0

. scripts/find-python.sh  # find_python 3.X

# venv NAME PYTHON: a clean virtualenv with the pinned pip and uv
venv() {
  "$2" -m venv "$work/$1"
  "$work/$1/bin/pip" install -q "pip==$pip_version" "uv==$uv_version"
}

# install_wheel NAME PYTHON CONSTRAINTS EXTRAS: the built wheel with EXTRAS in a clean virtualenv
install_wheel() {
  venv "$1" "$2"
  "$work/$1/bin/uv" pip install -q --python "$work/$1/bin/python" -c "$3" "upsert-kafka-ops[$4] @ file://$wheel"
}

# the package's resources folder as the virtualenv NAME installed it
resources_of() {
  (cd "$work" && "$work/$1/bin/python" -c 'from importlib.resources import files; print(files("upsert_kafka_ops") / "resources")')
}

fail() { echo "wheel check: $*" >&2; exit 1; }

py313=$(find_python 3.13)
py310=$(find_python 3.10)

echo "== build: sdist and wheel with python -m build, then twine check"
venv tools "$py313"
"$work/tools/bin/uv" pip install -q --python "$work/tools/bin/python" "build==$BUILD_VERSION" "twine==$TWINE_VERSION"
"$work/tools/bin/python" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "python -m build failed"; }
"$work/tools/bin/twine" check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/upsert_kafka_ops-*.whl)
# everything a command reads at run time is inside the package
unzip -l "$wheel" | grep -q "upsert_kafka_ops/resources/demo.yaml" || fail "the wheel lacks the demo's pipeline file"

echo "== Python 3.13, the airflow extra: the provider is listed and the repository's DAGs parse"
install_wheel airflow "$py313" constraints/spark-4.1-py3.13.txt airflow
export AIRFLOW_HOME=$work/airflow-home
mkdir -p "$AIRFLOW_HOME/dags"
cp dags/*.py "$AIRFLOW_HOME/dags/"
resources=$(resources_of airflow)
case "$resources" in "$work"/airflow/*) ;; *) fail "the package imported from $resources, not the installed wheel" ;; esac
(cd "$work" && "$work/airflow/bin/airflow" db migrate) >"$work/airflow-db.log" 2>&1 ||
  { tail -20 "$work/airflow-db.log"; fail "airflow db migrate failed"; }
(cd "$work" && "$work/airflow/bin/airflow" providers list -o json) >"$work/providers.json"
grep -q '"package_name": "upsert-kafka-ops"' "$work/providers.json" || fail "airflow providers list lacks upsert-kafka-ops"
(cd "$work" && env AIRFLOW__CORE__DAGS_FOLDER="$AIRFLOW_HOME/dags" AIRFLOW__CORE__LOAD_EXAMPLES=false \
  UKO_PIPELINES_DIR="$resources" "$work/airflow/bin/airflow" dags list --local -o json) >"$work/dags.json"
"$work/airflow/bin/python" - "$work/dags.json" <<'EOF'
import json, sys
# Airflow's CLI prints warnings on stdout too: the listing is the line that is a JSON array
listing = next(line for line in open(sys.argv[1]) if line.startswith("["))
dags = {d["dag_id"] for d in json.loads(listing)}
want = {"upsert_kafka_demo", "upsert_kafka_backfill", "users_to_delta"}
assert want <= dags, f"airflow dags list: {sorted(dags)} lacks {sorted(want - dags)}"
print(f"airflow parsed {len(dags)} DAGs: {', '.join(sorted(dags))}")
EOF

echo "== Python 3.13, the dagster extra: dg loads a project whose defs.yaml uses the Component"
install_wheel dagster "$py313" constraints/spark-4.1-py3.13.txt dagster
project=$work/dg-project
mkdir -p "$project/src/wheel_check/defs/demo"
printf '[project]\nname = "wheel-check"\nversion = "0"\n\n[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "wheel_check"\n' >"$project/pyproject.toml"
touch "$project/src/wheel_check/__init__.py"
printf 'from pathlib import Path\n\nimport dagster as dg\n\n\n@dg.definitions\ndef defs() -> dg.Definitions:\n    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)\n' \
  >"$project/src/wheel_check/definitions.py"
printf 'type: upsert_kafka_ops.dagster.UpsertKafkaPipelineComponent\nattributes:\n  pipeline_file: %s/demo.yaml\n  bootstrap_servers: localhost:9092\n' \
  "$(resources_of dagster)" \
  >"$project/src/wheel_check/defs/demo/defs.yaml"
(cd "$project" && PATH="$work/dagster/bin:$PATH" PYTHONPATH=src dg list defs --json) >"$work/defs.json"
"$work/dagster/bin/python" - "$work/defs.json" <<'EOF'
import json, sys
defs = json.load(open(sys.argv[1]))
assert len(defs["assets"]) >= 5 and defs["asset_checks"] and defs["resources"], defs
print(f"dg list defs: {len(defs['assets'])} assets, {len(defs['asset_checks'])} checks, {len(defs['resources'])} resources")
EOF

echo "== Python 3.10: the wheel with both extras installs and imports"
install_wheel py310 "$py310" constraints/spark-4.1-py3.10.txt airflow,dagster
(cd "$work" && "$work/py310/bin/python" -c 'import upsert_kafka_ops.airflow.operators, upsert_kafka_ops.dagster, upsert_kafka_ops.runtime; from upsert_kafka_ops.jobs import Pipeline; import upsert_kafka_ops.cli.demo as d; Pipeline.load(d.PIPELINE); print("python 3.10: imports and loads the demo pipeline")')

echo "== the demo from the installed wheel alone (Python 3.13, an empty folder)"
mkdir -p "$work/demo-cwd"
(cd "$work/demo-cwd" && "$work/airflow/bin/upsert-kafka-ops" demo --dir "$work/demo-cwd/demo") >"$work/demo.log" 2>&1 ||
  { tail -40 "$work/demo.log"; fail "upsert-kafka-ops demo failed from the wheel"; }
grep -q "^demo: done in" "$work/demo.log" || fail "the demo printed no summary"
grep "^demo: done in" "$work/demo.log"
echo "== wheel check passed: $(basename "$wheel")"
