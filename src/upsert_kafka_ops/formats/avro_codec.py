"""Flink's ``avro`` format (binary encoding, no header) with Spark's ``to_avro`` / ``from_avro``.

:func:`avro_schema` derives the writer schema exactly as Flink's ``AvroSchemaConverter`` does: a
record ``record`` in namespace ``org.apache.flink.avro.generated``, nested rows ``record_<field>``,
a nullable type as the union ``["null", T]`` with ``"default": null`` and a NOT NULL type bare (so
the PRIMARY KEY columns of an upsert table, which are NOT NULL, are plain types in the key record).

Values are converted where Spark and Flink represent them differently: TIMESTAMP (legacy mapping,
the default) is the local date-time read as UTC, in epoch milliseconds; TIMESTAMP_LTZ (only with
``timestamp_mapping.legacy = false``) is epoch milliseconds too, even where the schema says micros,
as Flink writes it; TIME is ``int`` milliseconds of the day from the TIME text; TINYINT and SMALLINT
travel as ``int``. Decoding reads with the same schema minus the time logical types (the bytes are
identical) and converts back. Bytes that do not decode are flagged as errors: Spark's ``from_avro``
in PERMISSIVE mode does not give NULL for them but a row whose every field is NULL, which a valid
record can also be. So the reader schema carries one more field, :data:`DECODED`, a boolean with
default true that no writer has: Avro resolution fills it for every record that decodes, and it is
NULL exactly where Spark swallowed a decoding error.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.columns import Decoded, Fields

if TYPE_CHECKING:
    from pyspark.sql import Column

    from upsert_kafka_ops.spec.types import SqlType

NAMESPACE = "org.apache.flink.avro.generated"
_PRIMITIVE = {
    "BOOLEAN": "boolean",
    "TINYINT": "int",
    "SMALLINT": "int",
    "INT": "int",
    "BIGINT": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
    "STRING": "string",
    "VARCHAR": "string",
    "CHAR": "string",
    "BYTES": "bytes",
    "BINARY": "bytes",
    "VARBINARY": "bytes",
}
_TIME_LOGICAL = {"time-millis", "timestamp-millis", "timestamp-micros"} | {
    "local-timestamp-millis",
    "local-timestamp-micros",
}


def avro_schema(fields: Fields, legacy_timestamps: bool = True) -> dict[str, Any]:
    """The Avro schema (as JSON data) Flink's ``AvroSchemaConverter.convertToSchema`` gives the
    NOT NULL row of ``fields``; each field's ``SqlType.nullable`` decides union or plain type."""
    from upsert_kafka_ops.spec.types import RowField, SqlType

    row = SqlType("ROW", nullable=False, fields=tuple(RowField(n, t) for n, t in fields))
    schema = _schema(row, "record", legacy_timestamps, top=True)
    assert isinstance(schema, dict)
    return schema


def _schema(t: SqlType, row_name: str, legacy: bool, top: bool = False) -> Any:
    s: Any
    if t.name in _PRIMITIVE:
        s = _PRIMITIVE[t.name]
    elif t.name == "DECIMAL":
        s = {"type": "bytes", "logicalType": "decimal", "precision": t.params[0], "scale": t.params[1]}
    elif t.name == "DATE":
        s = {"type": "int", "logicalType": "date"}
    elif t.name == "TIME":
        if t.params and t.params[0] > 3:
            raise SpecError("avro", f"type {t.to_flink()}: Avro TIME supports precision 3 at most.")
        s = {"type": "int", "logicalType": "time-millis"}
    elif t.name == "TIMESTAMP":
        p = t.params[0] if t.params else 6
        if legacy and p > 3:
            raise SpecError(
                "avro",
                f"type {t.to_flink()}: with avro.timestamp_mapping.legacy = 'true' (the default) Flink's "
                "Avro format supports TIMESTAMP precision 3 at most.",
                "declare TIMESTAMP(3), or set avro.timestamp_mapping.legacy = 'false'.",
            )
        if p > 6:
            raise SpecError("avro", f"type {t.to_flink()}: Avro supports TIMESTAMP precision 6 at most.")
        kind = "timestamp" if legacy else "local-timestamp"
        s = {"type": "long", "logicalType": f"{kind}-{'millis' if p <= 3 else 'micros'}"}
    elif t.name == "TIMESTAMP_LTZ":
        p = t.params[0] if t.params else 6
        if legacy:
            raise SpecError(
                "avro",
                f"type {t.to_flink()}: Flink's Avro format refuses TIMESTAMP_LTZ with "
                "avro.timestamp_mapping.legacy = 'true' (the default).",
                "set avro.timestamp_mapping.legacy = 'false', or declare TIMESTAMP(3).",
            )
        if p > 6:
            raise SpecError("avro", f"type {t.to_flink()}: Avro supports TIMESTAMP_LTZ precision 6 at most.")
        s = {"type": "long", "logicalType": f"timestamp-{'millis' if p <= 3 else 'micros'}"}
    elif t.name == "ROW":
        fields = []
        for f in t.fields:
            field: dict[str, Any] = {"name": f.name, "type": _schema(f.type, f"{row_name}_{f.name}", legacy)}
            if f.type.nullable:
                field["default"] = None
            fields.append(field)
        s = {"type": "record", "name": row_name, "fields": fields}
        if top:
            s["namespace"] = NAMESPACE
    elif t.name == "ARRAY" and t.element is not None:
        s = {"type": "array", "items": _schema(t.element, row_name, legacy)}
    elif t.name in ("MAP", "MULTISET"):
        key = t.key if t.name == "MAP" else t.element
        assert key is not None
        if key.name not in ("STRING", "VARCHAR", "CHAR"):
            raise SpecError("avro", f"type {t.to_flink()}: Avro maps need string keys.")
        from upsert_kafka_ops.spec.types import SqlType

        value = t.value if t.name == "MAP" else SqlType("INT", nullable=False)
        assert value is not None
        s = {"type": "map", "values": _schema(value, row_name, legacy)}
    else:
        raise SpecError("avro", f"type {t.to_flink()} cannot be written as Avro.")
    return ["null", s] if t.nullable else s


#: the reader-only field that marks a record as decoded (see the module docstring)
DECODED = "__uko_decoded"


def checked_reader(schema: Any) -> str:
    """The reader schema (JSON text) with the :data:`DECODED` field added to its top-level record."""
    reader = plain_reader(schema)
    reader = {**reader, "fields": [*reader["fields"], {"name": DECODED, "type": "boolean", "default": True}]}
    return json.dumps(reader)


def decode_failed(data: Column, parsed: Column) -> Column:
    """True where ``data`` (not NULL) did not decode: ``parsed`` was read with :func:`checked_reader`."""
    return data.isNotNull() & (parsed.isNull() | parsed.getField(DECODED).isNull())


def plain_reader(s: Any) -> Any:
    """The schema Spark reads with: the same bytes, time logical types as plain int/long, decimals
    at precision 38 (a value past the declared precision then reads, and becomes NULL as in Flink,
    instead of failing the record)."""
    if isinstance(s, list):
        return [plain_reader(x) for x in s]
    if isinstance(s, dict):
        if s.get("logicalType") in _TIME_LOGICAL:
            return s["type"]
        if s.get("logicalType") == "decimal":
            return {**s, "precision": 38}
        return {k: plain_reader(v) for k, v in s.items()}
    return s


class AvroCodec:
    """Flink's ``avro`` format (``avro.encoding = 'binary'``)."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        from upsert_kafka_ops.spec.types import RowField, SqlType

        if options.get("encoding", "binary").lower() != "binary":
            raise SpecError("avro.encoding", "only 'binary' is supported.", "leave it at 'binary'.")
        legacy = options.get("timestamp_mapping.legacy", "true").lower()
        if legacy not in ("true", "false"):
            raise SpecError("avro.timestamp_mapping.legacy", f"must be 'true' or 'false', got {legacy!r}.")
        self.fields = fields
        self.schema = avro_schema(fields, legacy_timestamps=legacy == "true")
        self.schema_json = json.dumps(self.schema)
        self.reader_json = json.dumps(plain_reader(self.schema))
        self.checked_reader_json = checked_reader(self.schema)
        self.row_type = SqlType("ROW", nullable=False, fields=tuple(RowField(n, t) for n, t in fields))

    def encode(self, row: Column) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        return F.when(row.isNull(), F.lit(None)).otherwise(
            to_avro(to_avro_value(row, self.row_type), self.schema_json)
        )

    def parse(self, data: Column) -> Column:
        """Spark's Avro read of the bytes: the one costly step of :meth:`decode`."""
        from pyspark.sql.avro.functions import from_avro

        return from_avro(
            data, self.reader_json, {"mode": "PERMISSIVE", "avroSchema": self.checked_reader_json}
        )

    def decode(self, data: Column, parsed: Column | None = None) -> Decoded:
        from pyspark.sql import functions as F

        if parsed is None:
            parsed = self.parse(data)
        error = decode_failed(data, parsed)
        value = F.when(parsed.isNull(), F.lit(None)).otherwise(from_avro_value(parsed, self.row_type))
        return Decoded(value, error)


_MAX_MILLIS = (2**63 - 1) // 1000 - 86400000  # Spark holds microseconds in a long


def to_avro_value(c: Column, t: SqlType) -> Column:
    """A Spark value as the plain Avro value Flink writes."""
    from pyspark.sql import functions as F

    if t.name == "ROW":
        value = F.struct(*[to_avro_value(c.getField(f.name), f.type).alias(f.name) for f in t.fields])
        return value if not t.nullable else F.when(c.isNull(), F.lit(None)).otherwise(value)
    if t.name == "ARRAY" and t.element is not None:
        elem = t.element
        return F.transform(c, lambda x: to_avro_value(x, elem))
    if t.name == "MAP" and t.value is not None:
        v_t = t.value
        return F.transform_values(c, lambda _k, v: to_avro_value(v, v_t))
    if t.name in ("TINYINT", "SMALLINT"):
        return c.cast("int")
    if t.name == "TIMESTAMP":  # the local date-time as if UTC, in epoch millis
        return spark_compat.ntz_millis(c)
    if t.name == "TIMESTAMP_LTZ":  # Flink writes millis even for a micros schema
        return F.unix_millis(c)
    if t.name == "TIME":
        parts = F.split(F.regexp_extract(c, "^([0-9]{2}:[0-9]{2}(:[0-9]{2})?)", 1), ":")
        seconds = F.coalesce(F.try_element_at(parts, F.lit(3)).cast("int"), F.lit(0))
        frac = F.rpad(F.regexp_extract(c, "^[0-9:]{8}[.]([0-9]{1,3})", 1), 3, "0")
        millis = F.when(frac == "", F.lit(0)).otherwise(frac.cast("int"))
        return (
            F.try_element_at(parts, F.lit(1)).cast("int") * 3600000
            + F.try_element_at(parts, F.lit(2)).cast("int") * 60000
            + seconds * 1000
            + millis
        )
    return c


def from_avro_value(c: Column, t: SqlType) -> Column:
    """A value read with the plain reader schema, back to the Spark type of ``t``."""
    from pyspark.sql import functions as F

    if t.name == "ROW":
        value = F.struct(*[from_avro_value(c.getField(f.name), f.type).alias(f.name) for f in t.fields])
        return F.when(c.isNull(), F.lit(None)).otherwise(value)
    if t.name == "ARRAY" and t.element is not None:
        elem = t.element
        return F.transform(c, lambda x: from_avro_value(x, elem))
    if t.name == "MAP" and t.value is not None:
        v_t = t.value
        return F.transform_values(c, lambda _k, v: from_avro_value(v, v_t))
    # Flink reads the long as milliseconds whatever the schema says (micros too), as it writes it;
    # past Spark's range (about 290,000 years) the value is NULL, where Flink's text of it is garbled
    in_range = F.abs(c) <= F.lit(_MAX_MILLIS)
    if t.name == "TIMESTAMP":
        return F.when(in_range, spark_compat.ntz_from_millis(c))
    if t.name == "TIMESTAMP_LTZ":
        return F.when(in_range, F.timestamp_millis(c))
    if t.name == "TIME":
        ms = F.pmod(c, F.lit(86400000))
        hms = F.concat_ws(
            ":",
            F.lpad((ms / 3600000).cast("int").cast("string"), 2, "0"),
            F.lpad((ms / 60000 % 60).cast("int").cast("string"), 2, "0"),
            F.lpad((ms / 1000 % 60).cast("int").cast("string"), 2, "0"),
        )
        frac = F.regexp_replace(F.lpad((ms % 1000).cast("string"), 3, "0"), "0+$", "")
        text = F.concat(hms, F.when(frac == "", F.lit("")).otherwise(F.concat(F.lit("."), frac)))
        return F.when(c.isNull(), F.lit(None)).otherwise(text)
    if t.name in ("TINYINT", "SMALLINT"):  # an Avro int, narrowed as Java's byteValue()/shortValue()
        bits = 8 if t.name == "TINYINT" else 16
        return (F.pmod(c.cast("long") + (1 << (bits - 1)), F.lit(1 << bits)) - (1 << (bits - 1))).cast(
            t.to_spark()
        )
    return spark_compat.try_cast(c, t.to_spark())  # DECIMAL past its precision: NULL, as in Flink
