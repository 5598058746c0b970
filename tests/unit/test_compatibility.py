"""docs/compatibility.md says which versions each verified set holds: checked against the constraints
files it names and against the line table of ``upsert_kafka_ops.spark_lines``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from upsert_kafka_ops import spark_lines

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "compatibility.md"
#: the verified-sets table's columns -> the package each names
PACKAGES = {"Spark": "pyspark", "Delta": "delta-spark", "Airflow": "apache-airflow",
            "Kafka provider": "apache-airflow-providers-apache-kafka", "Dagster": "dagster"}  # fmt: skip


def _table(title: str) -> list[dict[str, str]]:
    text = PAGE.read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in r.strip("|").split("|")), strict=True)) for r in rows[2:]]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            out[re.sub(r"[-_.]+", "-", name.lower())] = version.strip()
    return out


SETS = _table("The verified sets")


def test_every_constraints_file_is_in_the_table() -> None:
    named = {r["constraints file"].strip("`") for r in SETS}
    files = {"constraints.txt", *(f"constraints/{p.name}" for p in (ROOT / "constraints").glob("*.txt"))}
    assert named == files


@pytest.mark.parametrize("row", SETS, ids=[r["constraints file"].strip("`") for r in SETS])
def test_a_verified_sets_row_says_what_its_constraints_file_pins(row: dict[str, str]) -> None:
    file = ROOT / row["constraints file"].strip("`")
    pins = _pins(file)
    for column, package in PACKAGES.items():
        assert pins[package] == row[column], f"{file.name}: {package}"
    spark = row["Spark"]
    line = spark_lines.line_of(spark)
    assert spark_lines.delta_for(spark).version == row["Delta"]
    assert line.iceberg is not None and line.iceberg.version == row["Iceberg runtime"]
    low, high = line.python
    assert (
        tuple(map(int, low.split(".")))
        <= tuple(map(int, row["Python"].split(".")))
        <= tuple(map(int, high.split(".")))
    )
    if file.name != "constraints.txt":  # the others name their Python and line in the file name
        assert file.stem == f"spark-{line.line}-py{row['Python']}"


def test_the_lines_table_is_the_packages_line_table() -> None:
    rows = {r["Spark line"].split()[0]: r for r in _table("The lines")}
    assert set(rows) == set(spark_lines.LINES)
    for name, line in spark_lines.LINES.items():
        row = rows[name]
        assert row["releases"].startswith(".".join(map(str, line.oldest)))
        assert row["Scala"] == line.scala
        assert f"`{line.delta.artifact}` {line.delta.version}" in row["Delta"]
        if line.iceberg is None:
            assert row["Iceberg runtime"] == "none published" and "Iceberg" in row["not available"]
        else:
            assert row["Iceberg runtime"] == f"`{line.iceberg.artifact}` {line.iceberg.version}"
        assert row["Python"] == "-".join(line.python)
