"""Flink's ``avro-confluent`` format: Confluent's wire format around Flink's Avro encoding.

A message is the magic byte ``0``, the schema id as a 4-byte big-endian int, then the Avro binary
body. Writing registers the schema Flink derives from the columns (the same schema as the ``avro``
format) under the subject (default ``<topic>-key`` / ``<topic>-value``, Flink's) and prefixes every
body with its id; registering the same schema again gives the same id, so the bytes of a key never
change between runs and compaction and partitioning hold.

Reading resolves each record's writer schema by its id against the reader schema of the table's
columns (Avro schema resolution: a field the writer lacks takes the reader's default, NULL for a
nullable column; a field the reader lacks is skipped). Everything runs in the JVM: the driver asks the
registry for the schemas registered under the table's subjects and builds one ``from_avro(body,
writer, {avroSchema: reader})`` per id. This is the one difference from Flink, whose decoder fetches
any id on demand: a record whose id is not registered under the subject(s) is a bad record (it fails
the read naming topic, partition and offset; set ``avro-confluent.subject`` to the subject its
producer used).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats import schema_registry as sr
from upsert_kafka_ops.formats.avro_codec import (
    AvroCodec,
    decode_failed,
    from_avro_value,
    plain_reader,
    to_avro_value,
)
from upsert_kafka_ops.formats.columns import Decoded, Fields

if TYPE_CHECKING:
    from pyspark.sql import Column


MAGIC = b"\x00"
log = logging.getLogger(__name__)


def missing_fields(writer: Any, reader: Any, path: str = "") -> list[str]:
    """Reader record fields without a default that the writer's record lacks (Avro resolution fails
    on them), following records nested in fields of the same name."""
    w, r = _record(writer), _record(reader)
    if w is None or r is None:
        return []
    by_name = {f["name"]: f for f in w["fields"]}
    out: list[str] = []
    for field in r["fields"]:
        name = path + field["name"]
        if field["name"] not in by_name:
            if "default" not in field:
                out.append(name)
        else:
            out += missing_fields(by_name[field["name"]]["type"], field["type"], name + ".")
    return out


def _record(schema: Any) -> dict[str, Any] | None:
    """The record of a schema (or of its one non-null union branch)."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return _record(branches[0]) if len(branches) == 1 else None
    if isinstance(schema, dict) and schema.get("type") == "record":
        return schema
    return None


class AvroConfluentCodec:
    """``avro-confluent`` as a key or value format of the tables of ``topics``."""

    def __init__(
        self, fields: Fields, options: dict[str, str], topics: tuple[str, ...] = (), side: str = "value"
    ) -> None:
        self.avro = AvroCodec(fields, {})
        self.fields = fields
        self.config = sr.RegistryConfig.from_options(options)
        subject = options.get("subject")
        self.read_subjects = [subject] if subject else [f"{t}-{side}" for t in topics]
        self.write_subject = subject or (f"{topics[0]}-{side}" if len(topics) == 1 else None)
        self.side = side

    # -- writing ----------------------------------------------------------------------------------
    def schema_id(self) -> int:
        """Register the columns' schema under the write subject; its id."""
        if self.write_subject is None:
            raise SpecError(
                f"{self.side}.avro-confluent.subject",
                "is required to write to a table without exactly one topic.",
                "set it, e.g. '<topic>-value'.",
            )
        return sr.register(self.config, self.write_subject, self.avro.schema_json)

    def encode(self, row: Column) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        header = MAGIC + self.schema_id().to_bytes(4, "big")
        body = to_avro(to_avro_value(row, self.avro.row_type), self.avro.schema_json)
        return F.when(row.isNull(), F.lit(None)).otherwise(F.concat(F.lit(header), body))

    # -- reading ----------------------------------------------------------------------------------
    def parse(self, data: Column) -> Column:
        """The record read with its writer's schema (by the id in its header): the one costly step
        of :meth:`decode`."""
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        if not self.read_subjects:
            raise SpecError(
                f"{self.side}.avro-confluent.subject",
                "is required to read a 'topic-pattern' table (the subjects follow from named topics only).",
                "set it to the subject the producers register under.",
            )
        writers = sr.writer_schemas(self.config, self.read_subjects)
        reader = self.avro.checked_reader_json
        body = F.substring(data, 6, 2**31 - 1)
        schema_id = F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("long")
        framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == F.lit(MAGIC))
        # no known writer: a typed NULL (every non-null record is then an error)
        parsed = F.when(F.lit(False), from_avro(body, self.avro.reader_json, {"avroSchema": reader}))
        for sid, text in sorted(writers.items()):
            writer_schema = json.loads(text)
            missing = missing_fields(writer_schema, self.avro.schema)
            if missing:  # such records fail to resolve (bad records); say why once, here
                log.warning(
                    "avro-confluent: schema id %d under %s lacks the column(s) %s, which are NOT NULL in the "
                    "table (no default): its records cannot be read with these columns.",
                    sid,
                    self.read_subjects,
                    ", ".join(missing),
                )
                continue
            writer = json.dumps(plain_reader(writer_schema))
            options = {"mode": "PERMISSIVE", "avroSchema": reader}
            parsed = F.when(framed & (schema_id == F.lit(sid)), from_avro(body, writer, options)).otherwise(
                parsed
            )
        return parsed

    def decode(self, data: Column, parsed: Column | None = None) -> Decoded:
        from pyspark.sql import functions as F

        if parsed is None:
            parsed = self.parse(data)
        error = decode_failed(data, parsed)
        value = F.when(parsed.isNull(), F.lit(None)).otherwise(from_avro_value(parsed, self.avro.row_type))
        return Decoded(value, error)
