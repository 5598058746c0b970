"""Flink's ``raw`` format on Spark: one column, strings in a charset, numbers big-endian."""

from __future__ import annotations

from typing import TYPE_CHECKING

from upsert_kafka_ops import spark_compat
from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.columns import BINARY_TYPES, INTEGRAL_BYTES, Decoded, Fields

if TYPE_CHECKING:
    from pyspark.sql import Column

_STRINGS = {"STRING", "VARCHAR", "CHAR"}


class RawCodec:
    """Flink's ``raw`` format: one column; strings as text in a charset, numbers big-endian."""

    def __init__(self, fields: Fields, options: dict[str, str]) -> None:
        if len(fields) != 1:
            raise SpecError(
                "raw",
                f"the raw format holds exactly one column, got {len(fields)}: {', '.join(n for n, _ in fields)}.",
                "use json/csv/avro for several columns, or value.fields-include = 'EXCEPT_KEY'.",
            )
        self.name, self.type = fields[0]
        self.charset = options.get("charset", "UTF-8")
        if options.get("endianness", "big-endian") != "big-endian":
            raise SpecError("raw.endianness", "only 'big-endian' is supported.")
        if self.type.name not in _STRINGS | BINARY_TYPES | set(INTEGRAL_BYTES) | {"BOOLEAN"}:
            raise SpecError("raw", f"type {self.type.to_flink()} is not supported by the raw format here.")

    def parse(self, data: Column) -> None:
        """Nothing to parse apart from decoding (see :func:`~upsert_kafka_ops.formats.columns.parse_once`)."""
        return None

    def decode(self, data: Column, parsed: Column | None = None) -> Decoded:
        from pyspark.sql import functions as F

        n = INTEGRAL_BYTES.get(self.type.name)
        if self.type.name in BINARY_TYPES:
            value, error = data, F.lit(False)
        elif self.type.name in _STRINGS:
            # Java's String(bytes, charset), as Flink decodes: a malformed sequence becomes U+FFFD
            utf8 = self.charset.upper() in ("UTF-8", "UTF8")
            value = spark_compat.valid_utf8(data) if utf8 else F.decode(data, self.charset)
            error = F.lit(False)
        elif self.type.name == "BOOLEAN":
            # Flink reads one byte: any byte but 0 is true
            value, error = data != F.lit(b"\x00"), data.isNotNull() & (F.length(data) != 1)
        else:
            assert n is not None
            unsigned = F.conv(F.hex(data), 16, 10).cast("decimal(20,0)")
            half, full = (F.lit(str(2 ** (8 * n - k))).cast("decimal(20,0)") for k in (1, 0))
            signed = F.when(unsigned >= half, unsigned - full).otherwise(unsigned)
            value = signed.cast(self.type.to_spark())
            error = data.isNotNull() & (F.length(data) != n)
            value = F.when(error, F.lit(None)).otherwise(value)
        return Decoded(F.when(data.isNull(), F.lit(None)).otherwise(F.struct(value.alias(self.name))), error)

    def encode(self, row: Column) -> Column:
        from pyspark.sql import functions as F

        c = row.getField(self.name)
        n = INTEGRAL_BYTES.get(self.type.name)
        if self.type.name in BINARY_TYPES:
            return c
        if self.type.name in _STRINGS:
            return F.encode(c, self.charset)
        if self.type.name == "BOOLEAN":
            return F.when(c, F.lit(b"\x01")).when(~c, F.lit(b"\x00"))
        assert n is not None
        return F.unhex(F.substring(F.lpad(F.hex(c.cast("bigint")), 16, "0"), 17 - 2 * n, 2 * n))
