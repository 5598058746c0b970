"""What a table's file layout costs delta-rs's MERGE of 10 new records: issue 42's ten-million-key run.

The engine merges a small change into a Delta table with delta-rs (``engine.delta_rs.merge_small``),
which rewrites every file holding a touched key. A full run writes the table as one file per Spark
task, each file holding keys from the whole key range, so 10 random keys touch every file. This
bench measures delta-rs alone (no Spark, no Kafka) on tables of ``BENCH_LAYOUT_KEYS`` keys (default
10,000,000, and 1,000,000 for the ratio), laid out as:

- ``spread``: 4 files, keys in random order (what a full run writes);
- ``clustered``: 50 files, each holding one range of keys (what sorting the table by its key gives);
- ``clustered + key filter``: the same, the MERGE's predicate also naming the changed keys
  (``t.id IN (...)``), so delta-rs skips the files whose statistics exclude them;
- ``clustered + key filter + file size``: the same, with ``delta.targetFileSize`` near a file's size,
  so a MERGE writes its rewritten rows back as files of that size rather than one;
- ``200 clustered + key filter + file size``: the same in 200 files.

Each layout gets ``BENCH_LAYOUT_RUNS`` (8) MERGEs of 10 random keys in a row; it prints each one's
time and rows rewritten, and writes ``build/bench/delta_layout.json``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEYS = [int(k) for k in os.environ.get("BENCH_LAYOUT_KEYS", "1000000,10000000").split(",") if k]
RUNS = int(os.environ.get("BENCH_LAYOUT_RUNS", "8"))
OUT = Path(os.environ.get("BENCH_LAYOUT_OUT", "build/bench/delta_layout.json"))

#: (name, files, clustered, key filter, file size)
LAYOUTS = (
    ("spread", 4, False, False, False),
    ("clustered", 50, True, False, False),
    ("clustered + key filter", 50, True, True, False),
    ("clustered + key filter + file size", 50, True, True, True),
    ("200 clustered + key filter + file size", 200, True, True, True),
)


def write_table(path: str, keys: int, files: int, clustered: bool) -> int:
    """A table of ``keys`` rows (an id and four columns) in ``files`` appends; returns a file's size."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    ids = np.arange(keys, dtype=np.int64)
    if not clustered:
        np.random.default_rng(1).shuffle(ids)
    per = keys // files
    for i in range(files):
        part = pa.array(ids[i * per : (i + 1) * per])
        rows = pa.table(
            {
                "id": part,
                "name": pc.cast(part, pa.string()),
                "region": pc.cast(pc.multiply(part, 7), pa.string()),
                "score": pc.cast(part, pa.float64()),
                "active": pc.equal(pc.bit_wise_and(part, 1), 0),
            }
        )
        write_deltalake(path, rows, mode="append")
    first = DeltaTable(path).file_uris()[0]
    return os.path.getsize(first.removeprefix("file://"))


def merges(path: str, keys: int, key_filter: bool, rnd: random.Random) -> list[dict[str, Any]]:
    """``RUNS`` MERGEs of 10 random keys (updates, or inserts of keys never held), one after another."""
    import pyarrow as pa
    from deltalake import DeltaTable

    out = []
    for _ in range(RUNS):
        changed = rnd.sample(range(keys + keys // 100), 10)
        source = pa.table(
            {
                "id": pa.array(changed, pa.int64()),
                "name": pa.array(["new"] * 10),
                "region": pa.array(["r"] * 10),
                "score": pa.array([1.0] * 10),
                "active": pa.array([True] * 10),
            }
        )
        predicate = "t.id = s.id"
        if key_filter:
            predicate += f" AND t.id IN ({', '.join(map(str, changed))})"
        began = time.monotonic()
        m = (
            DeltaTable(path)
            .merge(source, predicate=predicate, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        out.append(
            {
                "seconds": time.monotonic() - began,
                "rows_rewritten": int(m["num_target_rows_copied"]),
                "files_removed": int(m["num_target_files_removed"]),
                "files_added": int(m["num_target_files_added"]),
            }
        )
    return out


def main() -> int:
    from deltalake import DeltaTable

    results = []
    with tempfile.TemporaryDirectory(prefix="uko-bench-layout-") as tmp:
        for keys in KEYS:
            for name, files, clustered, key_filter, sized in LAYOUTS:
                if keys < max(KEYS) and name != "spread":
                    continue  # the smaller size is the ratio's denominator, as the full run lays it out
                path = str(Path(tmp) / f"{keys}-{files}-{clustered}-{key_filter}-{sized}")
                size = write_table(path, keys, files, clustered)
                if sized:
                    DeltaTable(path).alter.set_table_properties(
                        {"delta.targetFileSize": str(int(size * 1.2))}
                    )
                runs = merges(path, keys, key_filter, random.Random(keys))
                shutil.rmtree(path)
                results.append(
                    {"keys": keys, "layout": name, "files": files, "file_bytes": size, "runs": runs}
                )
                times = ", ".join(f"{r['seconds']:.2f}" for r in runs)
                rewritten = ", ".join(f"{r['rows_rewritten'] / 1e6:.1f}" for r in runs)
                print(f"delta layout: {keys:>10,} keys, {name:<40} s: {times}", flush=True)
                print(f"{'':>50} rows rewritten (M): {rewritten}", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
