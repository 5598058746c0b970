"""Values at their edges, for every type the text formats hold, written as Flink writes them and as
other producers do: more precision than declared, numbers as strings, padding, overflow, empty text,
nulls, other shapes. Each :class:`Sample` is one value as a JSON token and as a CSV field (``None``
where a format cannot carry it); :func:`column_types` draws a table's columns with random parameters
(precisions, scales, lengths) and :func:`samples` a column's values: the fixed edges and random
plain values. Which of them Flink accepts, and as what, is for the real Flink to say.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One value: ``json`` is a JSON token, ``csv`` a CSV field (quoted where it must be)."""

    tag: str
    json: str | None
    csv: str | None


def _csv_field(text: str) -> str:
    """A CSV field holding ``text`` verbatim: quoted (quotes doubled) when it needs to be."""
    if any(ch in text for ch in ',"\r\n') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def text(tag: str, value: str) -> Sample:
    """A value as text: a JSON string, a CSV field."""
    return Sample(tag, json.dumps(value), _csv_field(value))


def token(tag: str, value: str, csv: str | None = None) -> Sample:
    """A JSON token written as is (a number, true, an object); in CSV its text unless given."""
    return Sample(tag, value, _csv_field(value) if csv is None else csv)


def json_only(tag: str, value: str) -> Sample:
    return Sample(tag, value, None)


NULL = Sample("null", "null", None)  # CSV has no NULL without a null-literal

_INT_RANGE = {"TINYINT": 7, "SMALLINT": 15, "INT": 31, "BIGINT": 63}


def column_types(rng: random.Random, fmt: str) -> list[str]:
    """One column of every type ``fmt`` holds (three TIMESTAMP and two TIMESTAMP_LTZ precisions),
    parameters drawn at random."""
    p = rng.randint(1, 38)
    types = [
        "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE",
        f"DECIMAL({p}, {rng.randint(0, p)})", "BOOLEAN", "STRING", f"VARCHAR({rng.randint(1, 5)})",
        "DATE", f"TIME({rng.randint(0, 3)})",
        *[f"TIMESTAMP({p})" for p in sorted(rng.sample(range(10), 3))],
        *[f"TIMESTAMP_LTZ({p})" for p in sorted(rng.sample(range(10), 2))], "BYTES", "ARRAY<INT>", "ROW<`a` INT, `b` STRING>",
    ]  # fmt: skip
    if fmt == "json":
        types += ["MAP<STRING, INT>", "ARRAY<ROW<`x` DOUBLE>>"]
    return types


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n)) if n > 0 else ""


def _decimal_plain(rng: random.Random, p: int, s: int) -> str:
    whole = _digits(rng, rng.randint(0, p - s)).lstrip("0") or "0"
    frac = _digits(rng, s)
    sign = rng.choice(["", "-"])
    return f"{sign}{whole}.{frac}" if s else f"{sign}{whole}"


def _params(sql_type: str) -> list[int]:
    inside = sql_type.partition("(")[2].rstrip(")")
    return [int(x) for x in inside.split(",")] if inside else []


def samples(sql_type: str, rng: random.Random) -> list[Sample]:
    """The values tried for a column of ``sql_type``: its edges and a few random plain values."""
    return [*_maker(sql_type)(sql_type, rng), NULL]


def plain(sql_type: str, rng: random.Random) -> Sample:
    """A value every reader takes: what Flink's own encoder writes for a plain value."""
    return _samples_plain(sql_type, rng)[0]


def _integers(sql_type: str, rng: random.Random) -> list[Sample]:
    bits = _INT_RANGE[sql_type]
    top, bottom = 2**bits - 1, -(2**bits)
    out = [token("plain", str(rng.randint(bottom, top))) for _ in range(2)]
    return [*out,
        token("max", str(top)), token("min", str(bottom)),
        token("over", str(top + 1)), token("under", str(bottom - 1)),
        text("as-string", "42"), text("padded-string", " 42 "), token("fraction", "1.5"),
        token("fraction-exact", "2.0"), token("exponent", "1e2"), token("negative-zero", "-0"),
        text("plus-sign", "+7"), text("hex", "0x10"), text("word", "abc"), text("empty", ""),
        token("boolean", "true"), json_only("object", '{"a":1}'), json_only("array", "[1]"),
        text("leading-zeros", "007"), token("huge", "1" + "0" * 30),
    ]  # fmt: skip


def _floats(sql_type: str, rng: random.Random) -> list[Sample]:
    # plain values Python and Java print alike (a few binary digits)
    out = [token("plain", repr(rng.randint(-(10**6), 10**6) / 8)) for _ in range(2)]
    return [*out,
        text("nan", "NaN"), text("infinity", "Infinity"), text("minus-infinity", "-Infinity"),
        token("minus-zero", "-0.0"), token("zero", "0.0"), token("integer", "3"),
        token("max-double", "1.7976931348623157E308"), token("over-double", "1e400"),
        token("min-double", "4.9E-324"), token("under-double", "1e-400"),
        token("max-float", "3.4028235E38"), token("over-float", "3.5e38"), token("tiny-float", "1.0E-46"),
        text("as-string", "1.25"), text("padded-string", " 1.25 "), text("java-suffix", "1.5f"),
        text("lower-nan", "nan"), text("short-inf", "inf"), text("word", "abc"), text("empty", ""),
        token("many-digits", "0.1000000000000000055511151231257827"), token("boolean", "false"),
    ]  # fmt: skip


def _decimals(sql_type: str, rng: random.Random) -> list[Sample]:
    p, s = _params(sql_type)
    out = [token("plain", _decimal_plain(rng, p, s)) for _ in range(3)]
    nines = "9" * (p - s) + ("." + "9" * s if s else "")
    return [*out,
        token("max", nines), token("max-negative", "-" + nines),
        token("over", "1" + "0" * (p - s)), token("over-by-rounding", nines + "9"),
        token("more-scale", "0." + "4" * (s + 1) + "5"), token("half-up", "0." + "0" * s + "5"),
        token("exponent", "1.5E1"), token("small-exponent", "1E-3"), token("huge-exponent", "1e400"),
        text("as-string", "1.5"), text("padded-string", " 1.5 "), text("word", "abc"), text("empty", ""),
        token("integer", "7"), token("negative-zero", "-0.0"), token("boolean", "true"),
        token("long-digits", "0." + "1" * 45),
    ]  # fmt: skip


def _booleans(sql_type: str, rng: random.Random) -> list[Sample]:
    return [
        token("plain", "true"), token("false", "false"), text("as-string", "true"), text("upper", "TRUE"),
        text("yes", "yes"), token("one", "1"), token("zero", "0"), text("empty", ""),
        text("padded", " true "), text("word", "abc"), json_only("object", '{"a":1}'),
    ]  # fmt: skip


def _strings(sql_type: str, rng: random.Random) -> list[Sample]:
    letters = 'abcXYZ éßø€𝄞,;"\\'
    out = [text("plain", "".join(rng.choice(letters) for _ in range(rng.randint(0, 12)))) for _ in range(2)]
    return [*out,
        text("unicode", "ünï€ødé 𝄞 😀"), text("nul", "a\u0000b"), text("control", "tab\there\nline"),
        text("empty", ""), text("spaces", "  padded  "), text("long", "x" * 40),
        token("number", "12"), token("decimal-number", "1.50"), token("exponent-number", "1e2"),
        token("boolean", "true"), json_only("object", '{"b": [1, 2], "a": "x"}'), json_only("array", "[1, \"a\"]"),
        text("null-word", "null"), text("quote", 'say "hi"'), text("backslash", "a\\b"),
    ]  # fmt: skip


def _dates(sql_type: str, rng: random.Random) -> list[Sample]:
    day = f"{rng.randint(1970, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return [
        text("plain", day), text("epoch", "1970-01-01"), text("first", "0001-01-01"),
        text("last", "9999-12-31"), text("leap", "2024-02-29"), text("not-leap", "2023-02-29"),
        text("short-fields", "2024-1-2"), text("compact", "20240102"), text("with-time", "2024-01-02T00:00:00"),
        text("with-space-time", "2024-01-02 00:00:00"), text("padded", " 2024-01-02 "),
        text("before-epoch", "1969-12-31"), token("number", "19724"),
        text("empty", ""), text("word", "abc"),
    ]  # fmt: skip


def _times(sql_type: str, rng: random.Random) -> list[Sample]:
    clock = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return [
        text("plain", clock), text("millis", "03:04:05.123"), text("micros", "03:04:05.123456"),
        text("nanos", "23:59:59.999999999"), text("one-digit", "03:04:05.9"), text("no-seconds", "03:04"),
        text("short-hour", "3:04:05"), text("midnight", "00:00:00"), text("twenty-four", "24:00:00"),
        text("zone", "03:04:05Z"), text("padded", " 03:04:05 "), text("bare-point", "03:04:05."),
        token("number", "11045"), text("empty", ""),
    ]  # fmt: skip


def _timestamps(sql_type: str, rng: random.Random) -> list[Sample]:
    day = f"{rng.randint(1970, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    clock = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    zone = "Z" if sql_type.startswith("TIMESTAMP_LTZ") else ""
    fractions = [text(f"fraction-{n}", f"{day} {clock}.{_digits(rng, n)}{zone}") for n in range(1, 10)]
    return [
        text("plain", f"{day} {clock}{zone}"), *fractions,
        text("iso-t", f"{day}T{clock}.123456{zone}"), text("iso-no-seconds", f"{day}T03:04{zone}"),
        text("no-seconds", f"{day} 03:04{zone}"), text("date-only", day),
        text("before-epoch", f"1969-12-31 23:59:59.999999{zone}"), text("first", f"0001-01-01 00:00:00{zone}"),
        text("last", f"9999-12-31 23:59:59.999999999{zone}"), text("padded", f" {day} {clock}{zone} "),
        text("other-zone", f"{day} {clock}+01:00"), text("zulu", f"{day} {clock}Z"),
        text("no-zone", f"{day} {clock}"), text("bare-point", f"{day} {clock}.{zone}"),
        text("short-fields", f"2024-1-2 3:04:05{zone}"), token("number", "1704164645000"),
        text("empty", ""), text("word", "abc"),
    ]  # fmt: skip


def _bytes(sql_type: str, rng: random.Random) -> list[Sample]:
    raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
    b64 = base64.b64encode(raw).decode()
    return [
        text("plain", b64), text("empty", ""), text("unpadded", "AQI"), text("padded", "AQI="),
        text("url-safe", "-_-_"), text("standard", "+/+/"), text("with-newline", "AQID\nBAUG"),
        text("with-space", "AQID BAUG"), text("not-base64", "not base64!"), token("number", "12"),
    ]  # fmt: skip


def _arrays(sql_type: str, rng: random.Random) -> list[Sample]:
    if "ROW" in sql_type:
        return [
            json_only("plain", '[{"x": 1.5}, {"x": null}]'), json_only("empty", "[]"),
            json_only("null-element", "[null]"), json_only("string-number", '[{"x": "2.5"}]'),
            json_only("not-array", '{"x": 1}'), json_only("missing-field", "[{}]"),
        ]  # fmt: skip
    n = [rng.randint(-1000, 1000) for _ in range(3)]
    return [
        Sample("plain", json.dumps(n), ";".join(map(str, n))), Sample("empty", "[]", '""'),
        Sample("null-element", "[1, null, 3]", None), Sample("string-element", '["4", " 5 "]', "4; 5 "),
        Sample("fraction-element", "[1.5]", "1.5"), Sample("bad-element", '["x"]', "x"),
        Sample("not-array", "7", None), Sample("one", "[9]", "9"), Sample("empty-element", None, "1;;3"),
        Sample("trailing-delimiter", None, "1;2;"), Sample("nested", "[[1]]", None),
    ]  # fmt: skip


def _maps(sql_type: str, rng: random.Random) -> list[Sample]:
    return [
        json_only("plain", '{"a": 1, "b": 2}'), json_only("empty", "{}"), json_only("null-value", '{"a": null}'),
        json_only("string-value", '{"a": "3"}'), json_only("bad-value", '{"a": "x"}'),
        json_only("not-object", "[1]"), json_only("unicode-key", '{"ü€": 4}'),
    ]  # fmt: skip


def _rows(sql_type: str, rng: random.Random) -> list[Sample]:
    a = rng.randint(-100, 100)
    return [
        Sample("plain", json.dumps({"a": a, "b": "x"}), f"{a};x"), Sample("empty-object", "{}", None),
        Sample("extra-field", '{"a": 1, "b": "y", "c": 3}', "1;y;3"), Sample("missing-field", '{"a": 2}', "2"),
        Sample("string-number", '{"a": "5", "b": "z"}', None), Sample("bad-field", '{"a": "x", "b": "z"}', "x;z"),
        Sample("not-object", "[1, 2]", None), Sample("null-fields", '{"a": null, "b": null}', None),
        Sample("empty-text", None, '""'),
    ]  # fmt: skip


_SAMPLES = {
    "TINYINT": _integers, "SMALLINT": _integers, "INT": _integers, "BIGINT": _integers,
    "FLOAT": _floats, "DOUBLE": _floats, "DECIMAL": _decimals, "BOOLEAN": _booleans,
    "STRING": _strings, "VARCHAR": _strings, "DATE": _dates, "TIME": _times,
    "TIMESTAMP": _timestamps, "TIMESTAMP_LTZ": _timestamps, "BYTES": _bytes,
    "ARRAY<INT>": _arrays, "ARRAY<ROW<`x` DOUBLE>>": _arrays, "MAP<STRING, INT>": _maps,
    "ROW<`a` INT, `b` STRING>": _rows,
}  # fmt: skip


def _maker(sql_type: str) -> Callable[[str, random.Random], list[Sample]]:
    maker = _SAMPLES.get(sql_type) or _SAMPLES.get(sql_type.partition("(")[0])
    if maker is None:
        raise AssertionError(f"no samples for {sql_type}")
    return maker


def _samples_plain(sql_type: str, rng: random.Random) -> list[Sample]:
    return [s for s in _maker(sql_type)(sql_type, rng) if s.tag == "plain"]
