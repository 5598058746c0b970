"""Kafka key and value formats as Spark column expressions (no Python UDFs: everything runs in the JVM).

A codec decodes the bytes of a key or value into a struct of its fields, plus a boolean column that
is true where the bytes could not be decoded, and encodes a struct back into bytes.

Decoding accepts what Flink's decoders accept instead of silently producing NULL: JSON numbers and
booleans sent as strings (``"42"``), numbers sent where strings are expected, both of Flink's
timestamp text forms (SQL ``2020-03-08 13:12:11.123`` and ISO-8601 ``2020-03-08T13:12:11.123``).
To get that, JSON and CSV fields are first read as text and then converted with ``try_cast``; a
field whose text does not convert marks the record as a parse error (never a silent NULL).
"""

from __future__ import annotations

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.formats.avro_codec import AvroCodec
from upsert_kafka_ops.formats.avro_confluent import AvroConfluentCodec
from upsert_kafka_ops.formats.columns import Fields
from upsert_kafka_ops.formats.csv_codec import CsvCodec
from upsert_kafka_ops.formats.json_codec import JsonCodec
from upsert_kafka_ops.formats.raw_codec import RawCodec

Codec = JsonCodec | RawCodec | CsvCodec | AvroCodec | AvroConfluentCodec
_CODECS: dict[str, type[JsonCodec | RawCodec | CsvCodec | AvroCodec]] = {
    "json": JsonCodec,
    "raw": RawCodec,
    "csv": CsvCodec,
    "avro": AvroCodec,
}


def make_codec(
    fmt: str, fields: Fields, options: dict[str, str], topics: tuple[str, ...] = (), side: str = "value"
) -> Codec:
    """The codec of ``fmt`` for these fields; ``options`` without the ``<format>.`` prefix.

    ``topics`` and ``side`` (key or value) give the Schema Registry subjects of ``avro-confluent``.
    """
    if fmt == "avro-confluent":
        return AvroConfluentCodec(fields, options, topics, side)
    if fmt not in _CODECS:
        raise SpecError(
            fmt,
            f"the {fmt!r} format is not implemented on Spark yet.",
            f"use one of {sorted([*_CODECS, 'avro-confluent'])}.",
        )
    return _CODECS[fmt](fields, options)
