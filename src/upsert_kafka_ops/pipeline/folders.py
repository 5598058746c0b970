"""A folder on some storage, one model for every field that names one (a table's, a checkpoint's,
a publish job's state), and the old pairs of fields that still read as one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError
from upsert_kafka_ops.spec.base import SpecModel, moved_into, within
from upsert_kafka_ops.spec.iceberg import IcebergCatalog
from upsert_kafka_ops.spec.storage import check_table_path


class Folder(SpecModel):
    """A folder: a local path, or s3a://bucket/folder on a store the pipeline names.

    A table's, a checkpoint's, a publish job's state: every field that names a folder is one."""

    path: str = Field(description="A local path or s3a://bucket/folder.")
    storage: str | None = Field(
        default=None,
        description="For an s3a:// path: the name of a store in the pipeline's 'storage' section (endpoint, "
        "region, credentials); none: AWS S3 with the AWS credential chain.",
    )

    @model_validator(mode="after")
    def _check_path(self) -> Folder:
        try:
            check_table_path(self.path, self.storage)
        except SpecError as exc:
            raise within(exc) from None
        return self

    @property
    def uri(self) -> str:
        return self.path if "://" in self.path else Path(self.path).absolute().as_uri()

    def folder(self, catalogs: Mapping[str, IcebergCatalog]) -> tuple[str, str | None] | None:
        """The folder and the name of its store."""
        return self.path, self.storage


def old_folder(data: Any, new: str, path: str, storage: str) -> Any:
    """A job's input with a folder given by its old pair of fields (``path``, ``storage``) moved
    into ``new``; a folder that cannot work is refused naming the fields the file uses."""
    if not isinstance(data, Mapping) or (path not in data and storage not in data):
        return data
    check_table_path(data.get(path), data.get(storage), path, storage)
    return moved_into(data, new, {path: "path", storage: "storage"}, f"job {data.get('name')!r}")
