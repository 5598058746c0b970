"""Flink's JSON changelog formats (``debezium-json``, ``canal-json``, ``maxwell-json``) as Spark
expressions: each Kafka record becomes zero, one or more changes (+I, -U, +U, -D), as Flink's
decoders emit them. Everything runs in the JVM: the envelope is read with ``from_json`` (an image
declared STRING keeps its raw JSON text), the images are decoded with the ``json`` codec, so quoted
numbers (canal sends every value as a string) and both timestamp text forms are read as Flink does.

- debezium: ``op`` c and r -> +I(after); u -> -U(before), +U(after); d -> -D(before). With
  ``debezium-json.schema-include`` the change is under ``payload``. A null value (Debezium's
  tombstone after a delete) yields nothing.
- canal: ``type`` INSERT/UPDATE/DELETE with a ``data`` array (one change per element); an UPDATE's
  -U image is the ``data`` row with the fields listed in ``old`` replaced by their old values.
  ``type`` CREATE (a DDL event) yields nothing; ``database.include`` / ``table.include`` (Java
  regular expressions over the whole name) keep only matching events.
- maxwell: ``type`` insert/update/delete with ``data`` and ``old`` (overlay as canal).

Anything else (not JSON, an unknown op or type, a missing image, an image that does not decode) is
a bad record: the engine fails naming topic, partition and offset, or skips it with
``<format>.ignore-parse-errors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from upsert_kafka_ops.formats.columns import Fields
from upsert_kafka_ops.formats.json_codec import JsonCodec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CDC_FORMATS = ("debezium-json", "canal-json", "maxwell-json")
EVENTS_TYPE = "array<struct<op:string,image:string,old:string>>"
#: the options the image decoder (the json codec) takes from a CDC format's options
_IMAGE_OPTIONS = ("timestamp-format.standard",)


def is_cdc(fmt: str | None) -> bool:
    return fmt in CDC_FORMATS


def _bool(options: dict[str, str], name: str) -> bool:
    return options.get(name, "false").strip().lower() == "true"


def decode_cdc(fmt: str, fields: Fields, options: dict[str, str], raw: DataFrame) -> DataFrame:
    """Raw Kafka records (``value``, ``topic``, ``partition``, ``offset``, ``timestamp``) -> one row
    per change: ``op``, the fields, ``_topic``, ``_partition``, ``_offset``, ``_timestamp``, ``_seq``
    (order of the change inside its record) and ``_bad`` (the record could not be decoded: one row
    with null fields). ``options`` are the format's options without the ``<format>.`` prefix."""
    from pyspark.sql import functions as F

    codec = JsonCodec(fields, {k: v for k, v in options.items() if k in _IMAGE_OPTIONS})
    text = F.col("value").cast("string")
    if fmt == "debezium-json":
        events, bad = _debezium(text, _bool(options, "schema-include"))
    elif fmt == "canal-json":
        events, bad = _canal(text, options)
    elif fmt == "maxwell-json":
        events, bad = _maxwell(text)
    else:
        raise ValueError(f"{fmt!r} is not a CDC format")
    # events: array<struct<op, image STRING, old STRING>>; one change per element
    keyed = raw.where(F.col("value").isNotNull()).select(
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_timestamp"),
        bad.alias("_envelope_bad"),
        events.alias("_events"),
    )
    # a bad record becomes one change with a null event (so it can be reported); a record with no
    # change (a filtered or DDL event) becomes none
    marker = F.array(F.lit(None).cast(EVENTS_TYPE.removeprefix("array<").removesuffix(">")))
    events_or_marker = F.when(F.col("_envelope_bad"), marker).otherwise(F.col("_events"))
    exploded = keyed.select("*", F.posexplode(events_or_marker).alias("_seq", "_e"))
    image = codec.decode(F.col("_e.image"))
    old = codec.decode(F.col("_e.old"))
    present = F.from_json(F.col("_e.old"), "MAP<STRING, STRING>")
    names = [n for n, _ in fields]
    # an update's before image: the row, with the fields named in `old` replaced by their old values
    overlaid = F.struct(
        *[
            F.when(F.coalesce(F.map_contains_key(present, n), F.lit(False)), old.value.getField(n))
            .otherwise(image.value.getField(n))
            .alias(n)
            for n in names
        ]
    )
    row = F.when(F.col("_e.old").isNotNull(), overlaid).otherwise(image.value)
    image_bad = (
        F.col("_e").isNull()
        | F.col("_e.image").isNull()
        | image.error
        | (F.col("_e.old").isNotNull() & (old.error | present.isNull()))
    )
    out = exploded.select(
        F.col("_e.op").alias("op"),
        *[row.getField(n).alias(n) for n in names],
        "_topic",
        "_partition",
        "_offset",
        "_timestamp",
        "_seq",
        (F.col("_envelope_bad") | image_bad).alias("_bad"),
    )
    return out


def _event(op: str, image: Column, old: Column | None = None) -> Column:
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(op).alias("op"),
        image.alias("image"),
        (old if old is not None else F.lit(None).cast("string")).alias("old"),
    )


def _debezium(text: Column, schema_include: bool) -> tuple[Column, Column]:
    from pyspark.sql import functions as F

    change = "`before` STRING, `after` STRING, `op` STRING"
    schema = (
        f"`payload` STRUCT<{change}>, `__corrupt` STRING"
        if schema_include
        else f"{change}, `__corrupt` STRING"
    )
    parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "__corrupt"})
    env = parsed.getField("payload") if schema_include else parsed
    op, before, after = env.getField("op"), env.getField("before"), env.getField("after")
    events = (
        F.when(op.isin("c", "r"), F.array(_event("+I", after)))
        .when(op == "u", F.array(_event("-U", before), _event("+U", after)))
        .when(op == "d", F.array(_event("-D", before)))
    )
    bad = parsed.isNull() | parsed.getField("__corrupt").isNotNull() | env.isNull() | events.isNull()
    return events, bad


def _matches(value: Column, pattern: str | None) -> Column:
    from pyspark.sql import functions as F

    if not pattern:
        return F.lit(True)
    return F.coalesce(value.rlike(f"^(?:{pattern})$"), F.lit(False))


def _canal(text: Column, options: dict[str, str]) -> tuple[Column, Column]:
    from pyspark.sql import functions as F

    schema = "`data` ARRAY<STRING>, `old` ARRAY<STRING>, `type` STRING, `database` STRING, `table` STRING, `__corrupt` STRING"
    parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "__corrupt"})
    kind, data, old = parsed.getField("type"), parsed.getField("data"), parsed.getField("old")
    wanted = _matches(parsed.getField("database"), options.get("database.include")) & _matches(
        parsed.getField("table"), options.get("table.include")
    )
    empty = F.array().cast(EVENTS_TYPE)
    inserts = F.transform(data, lambda d: _event("+I", d))
    deletes = F.transform(data, lambda d: _event("-D", d))
    updates = F.flatten(
        F.transform(
            data,
            lambda d, i: F.array(
                _event("-U", d, F.coalesce(F.try_element_at(old, F.lit(i + 1)), F.lit("{}"))), _event("+U", d)
            ),
        )
    )
    events = (
        F.when(~wanted | (kind == "CREATE"), empty)
        .when(data.isNull(), F.lit(None))
        .when(kind == "INSERT", inserts)
        .when(kind == "UPDATE", updates)
        .when(kind == "DELETE", deletes)
    )
    bad = parsed.isNull() | parsed.getField("__corrupt").isNotNull() | events.isNull()
    return events, bad


def _maxwell(text: Column) -> tuple[Column, Column]:
    from pyspark.sql import functions as F

    schema = (
        "`data` STRING, `old` STRING, `type` STRING, `database` STRING, `table` STRING, `__corrupt` STRING"
    )
    parsed = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "__corrupt"})
    kind, data, old = parsed.getField("type"), parsed.getField("data"), parsed.getField("old")
    events = (
        F.when(data.isNull(), F.lit(None))
        .when(kind == "insert", F.array(_event("+I", data)))
        .when(kind == "update", F.array(_event("-U", data, F.coalesce(old, F.lit("{}"))), _event("+U", data)))
        .when(kind == "delete", F.array(_event("-D", data)))
    )
    bad = parsed.isNull() | parsed.getField("__corrupt").isNotNull() | events.isNull()
    return events, bad
