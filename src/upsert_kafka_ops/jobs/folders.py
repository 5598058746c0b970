"""Small files in a folder on the local file system or on S3: a Parquet target's offsets file, a
streaming checkpoint's query fingerprint, whether a checkpoint holds progress.

A local file is written to a temporary name and renamed into place; an S3 object is one PUT, so a
reader finds it whole or not at all. S3 goes through pyarrow's S3 filesystem (the ``s3`` extra), with
the store's settings from :class:`~upsert_kafka_ops.spec.storage.S3Storage`; a store that refuses or
cannot be reached is a :class:`StateError` naming the folder, the store and what to check.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from upsert_kafka_ops.errors import SpecError, UpsertKafkaOpsError
from upsert_kafka_ops.spec.storage import S3Storage, is_s3, split_s3


class StateError(UpsertKafkaOpsError):
    """The stored state of a target (or a checkpoint's files) cannot be read or does not fit the run."""


def local_path(uri: str, field_name: str = "path") -> Path:
    """A local folder for a path or ``file:`` URI; other schemes need Spark."""
    if "://" not in uri:
        return Path(uri.removeprefix("file:"))
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise SpecError(
            field_name,
            f"{uri!r} is not on the local file system; its state can only be read through Spark.",
            "use upsert_kafka_ops.jobs.read_stored_offsets with spark=... for remote tables.",
        )
    return Path(parsed.path)


def store_error(uri: str, storage: S3Storage, exc: BaseException) -> StateError:
    """The error for a store that refused or could not be reached while reading ``uri``."""
    where = storage.endpoint or "AWS S3"
    text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return StateError(
        f"cannot read {uri} on {where}: {text}. Check the store's endpoint, that the bucket exists and "
        "that the credentials may read it (the pipeline's 'storage' section)."
    )


def _s3_path(folder: str, name: str = "") -> str:
    bucket, key = split_s3(folder)
    return "/".join(p for p in (bucket, key, name) if p)


def read_text(folder: str, name: str, storage: S3Storage | None = None) -> str | None:
    """The text of ``folder/name``, or None when there is no such file."""
    if not is_s3(folder):
        file = local_path(folder) / name
        return file.read_text() if file.exists() else None
    store = storage or S3Storage()
    try:
        with store.filesystem().open_input_stream(_s3_path(folder, name)) as stream:
            return bytes(stream.read()).decode()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise store_error(folder, store, exc) from None


def write_text(folder: str, name: str, text: str, storage: S3Storage | None = None) -> None:
    """Write ``folder/name`` whole: a rename into place locally, one PUT on S3."""
    if is_s3(folder):
        with (storage or S3Storage()).filesystem().open_output_stream(_s3_path(folder, name)) as out:
            out.write(text.encode())
        return
    local = local_path(folder)
    local.mkdir(parents=True, exist_ok=True)
    tmp = local / f".{name}.tmp"
    tmp.write_text(text)
    tmp.replace(local / name)


def has_files(folder: str, storage: S3Storage | None = None) -> bool:
    """Whether ``folder`` holds at least one file (anywhere below it)."""
    if not is_s3(folder):
        local = local_path(folder)
        return local.is_dir() and any(p.is_file() for p in local.rglob("*"))
    from pyarrow.fs import FileSelector, FileType

    store = storage or S3Storage()
    selector = FileSelector(_s3_path(folder), allow_not_found=True, recursive=True)
    try:
        return any(i.type == FileType.File for i in store.filesystem().get_file_info(selector))
    except OSError as exc:
        raise store_error(folder, store, exc) from None


def file_names(folder: str, storage: S3Storage | None = None) -> list[str]:
    """The names of the files directly in ``folder`` (none when it does not exist)."""
    if not is_s3(folder):
        local = local_path(folder)
        return sorted(p.name for p in local.iterdir() if p.is_file()) if local.is_dir() else []
    from pyarrow.fs import FileSelector, FileType

    store = storage or S3Storage()
    selector = FileSelector(_s3_path(folder), allow_not_found=True, recursive=False)
    try:
        infos = store.filesystem().get_file_info(selector)
    except OSError as exc:
        raise store_error(folder, store, exc) from None
    return sorted(i.base_name for i in infos if i.type == FileType.File)


def delete_folder(folder: str, storage: S3Storage | None = None) -> bool:
    """Delete ``folder`` and everything below it; False when there was nothing."""
    if not is_s3(folder):
        import shutil

        local = local_path(folder)
        if not local.exists():
            return False
        shutil.rmtree(local)
        return True
    if not has_files(folder, storage):
        return False
    (storage or S3Storage()).filesystem().delete_dir(_s3_path(folder))
    return True
