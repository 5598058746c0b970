#!/usr/bin/env bash
# The verified sets of the other Spark lines and Python versions (constraints/*.txt), resolved by uv
# for each Python from pyproject.toml's ranges with the line's pyspark and delta-spark pinned, keeping
# every other version of constraints.txt (the default line's set) where that version resolves.
# Regenerate after `make constraints`: scripts/compile-constraints.sh [NAME...] (the lanes then verify
# them). A row's last fields are extra pins the resolver cannot know (pyarrow 26 imports only with
# NumPy 2, which pyspark 3.5 does not allow).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-.venv/bin/uv}
extras=(airflow dagster schema-registry connect s3 iceberg dev)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name python pyspark delta-spark [extra pins]
while read -r name python pyspark delta extra; do
  [ $# -eq 0 ] || [[ " $* " == *" $name "* ]] || continue
  out=constraints/$name.txt
  printf 'pyspark==%s\ndelta-spark==%s\n' "$pyspark" "$delta" >"$work/pins.txt"
  for pin in $extra; do echo "$pin" >>"$work/pins.txt"; done
  # uv prefers the versions already in its output file: start from the default set minus the pins
  grep -v -i -E '^(pyspark|delta-spark|py4j|pyarrow)==' constraints.txt >"$work/$name.txt"
  "$uv" pip compile -q pyproject.toml "${extras[@]/#/--extra=}" --python-version "$python" \
    -c "$work/pins.txt" -o "$work/$name.txt"
  {
    echo "# Spark $pyspark (delta-spark $delta) on Python $python: the exact versions verified to install and pass"
    echo "# together (make lanes). Regenerate: scripts/compile-constraints.sh"
    grep -E '^[A-Za-z0-9]' "$work/$name.txt" | grep -v -E '^(upsert-kafka-ops|setuptools)==' | sed 's/ .*//'
  } >"$out"
  echo "$out: $(grep -c '==' "$out") packages"
done <<'EOF'
spark-3.5-py3.11 3.11 3.5.7 3.3.2 pyarrow==25.0.1
spark-4.0-py3.12 3.12 4.0.0 4.0.0
spark-4.1-py3.10 3.10 4.1.1 4.4.0
spark-4.1-py3.13 3.13 4.1.1 4.4.0
EOF
