"""One hash of a row's values, for comparing rows without carrying them: verify compares a table
with its topic by it, and a history table tells a new version from a repeated one by it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

#: JSON of a row's values: NULLs kept, times to the microsecond (to_json's default stops at ms)
ROW_JSON = {
    "ignoreNullFields": "false",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


def quoted(name: str) -> str:
    """A column name for ``F.col``: back-quoted, so a dot in it is not a field access."""
    return "`" + name.replace("`", "``") + "`"


def row_hash(names: Sequence[str]) -> Column:
    """SHA-256 (hex) of the named columns as JSON with their names, so a NULL in one column never
    equals a value in another."""
    from pyspark.sql import functions as F

    return F.sha2(F.to_json(F.struct(*[F.col(quoted(n)) for n in names]), ROW_JSON), 256)
