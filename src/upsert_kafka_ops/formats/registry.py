"""What each Kafka format is: its Flink options and whether upsert-kafka can use it.

Pure data, no Spark: the specs validate options against it; the codecs (``formats.codecs``) implement
the formats on Spark.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormatInfo:
    """A format as Flink declares it."""

    name: str
    #: option names after the ``<format>.`` prefix (``json.ignore-parse-errors`` -> ``ignore-parse-errors``)
    options: frozenset[str]
    #: False for CDC formats (debezium-json, ...): their rows carry their own change kind
    insert_only: bool = True
    #: implemented by this package (the others are recognised, so errors can say so)
    supported: bool = True
    #: map-typed options given as ``<option>.<key>`` (avro-confluent's ``properties.*``)
    option_prefixes: frozenset[str] = frozenset()
    #: options that differ from Flink or are refused here: option -> (``differs`` | ``refused``, why);
    #: every other option does what Flink's does (docs/options.md lists them all)
    notes: tuple[tuple[str, str, str], ...] = ()

    def status(self, option: str) -> tuple[str, str]:
        """(``same`` | ``differs`` | ``refused``, why) of an option of this format."""
        for name, status, why in self.notes:
            if name == option:
                return status, why
        return "same", ""


#: options the JSON-based CDC formats share
_CDC_JSON = frozenset(
    {
        "ignore-parse-errors",
        "timestamp-format.standard",
        "map-null-key.mode",
        "map-null-key.literal",
        "encode.decimal-as-plain-number",
    }
)

FORMATS: dict[str, FormatInfo] = {
    f.name: f
    for f in (
        FormatInfo(
            "json",
            frozenset(
                {
                    "fail-on-missing-field",
                    "ignore-parse-errors",
                    "timestamp-format.standard",
                    "map-null-key.mode",
                    "map-null-key.literal",
                    "encode.decimal-as-plain-number",
                    "encode.ignore-null-fields",
                    "decode.json-parser.enabled",
                }
            ),
            notes=(
                (
                    "fail-on-missing-field",
                    "differs",
                    "'true' checks the top-level fields; with ROW columns it is refused (nested fields are not checked).",
                ),
                (
                    "map-null-key.mode",
                    "same",
                    "The value is checked as Flink checks it; a Spark map cannot hold a null key, so no mode has one "
                    "to act on.",
                ),
                (
                    "decode.json-parser.enabled",
                    "same",
                    "Flink's choice of parser implementation; the values read are the same.",
                ),
            ),
        ),
        FormatInfo(
            "csv",
            frozenset(
                {
                    "field-delimiter",
                    "disable-quote-character",
                    "quote-character",
                    "allow-comments",
                    "ignore-parse-errors",
                    "array-element-delimiter",
                    "escape-character",
                    "null-literal",
                    "write-bigdecimal-in-scientific-notation",
                }
            ),
        ),
        FormatInfo(
            "raw",
            frozenset({"charset", "endianness"}),
            notes=(
                ("endianness", "differs", "'big-endian' (Flink's default) only; 'little-endian' is refused."),
            ),
        ),
        FormatInfo(
            "avro",
            frozenset({"encoding", "timestamp_mapping.legacy"}),
            notes=(("encoding", "differs", "'binary' (Flink's default) only; 'json' is refused."),),
        ),
        FormatInfo(
            "avro-confluent",
            frozenset(
                {
                    "url",
                    "subject",
                    "schema",
                    "basic-auth.credentials-source",
                    "basic-auth.user-info",
                    "bearer-auth.credentials-source",
                    "bearer-auth.token",
                    "ssl.keystore.location",
                    "ssl.keystore.password",
                    "ssl.truststore.location",
                    "ssl.truststore.password",
                }
            ),
            option_prefixes=frozenset({"properties."}),
            notes=(
                (
                    "schema",
                    "refused",
                    "The Avro schema is always derived from the table's columns (Flink's default without it).",
                ),
            ),
        ),
        FormatInfo(
            "debezium-json",
            _CDC_JSON | {"schema-include"},
            insert_only=False,
        ),
        FormatInfo(
            "canal-json",
            _CDC_JSON | {"database.include", "table.include"},
            insert_only=False,
        ),
        FormatInfo(
            "maxwell-json",
            _CDC_JSON,
            insert_only=False,
        ),
        FormatInfo(
            "ogg-json",
            frozenset({"ignore-parse-errors", "timestamp-format.standard"}),
            insert_only=False,
            supported=False,
            notes=(("*", "refused", "The ogg-json format is not implemented."),),
        ),
    )
}
