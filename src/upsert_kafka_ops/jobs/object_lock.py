"""One run at a time per table on object storage: a lease object written with S3 conditional writes.

A table on disk is locked with ``flock`` and one in PostgreSQL with an advisory lock; S3 has neither,
and Delta's S3 log store does not stop two drivers from writing the same commit. The lock is an
object beside the table, created only if absent (``If-None-Match: *``) and renewed while the run
lasts (``If-Match`` its ETag). A run killed without releasing it leaves a lease that expires: when
the store's clock says the object is older than the lease, the next run replaces it (``If-Match``
the stale ETag, so only one of several waiting runs wins). AWS S3 and MinIO both honour these headers.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any

from upsert_kafka_ops.errors import UpsertKafkaOpsError
from upsert_kafka_ops.spec.storage import S3Storage, split_s3

log = logging.getLogger(__name__)

#: a lease the holder renews every third of it; a killed holder's lock is free this long after
LEASE_S = float(os.environ.get("UKO_OBJECT_LOCK_LEASE_S", "60"))
_TAKEN = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


class ObjectStoreError(UpsertKafkaOpsError):
    """The object store refused or could not be reached."""


def lock_key(uri: str) -> tuple[str, str]:
    """The lock object of the table at ``uri``: beside its folder (an overwrite of the folder must
    not remove it), ``s3a://b/a/t`` -> ``("b", "a/.t.upsert-kafka-ops.lock")``."""
    bucket, key = split_s3(uri)
    parent, _, name = key.rpartition("/")
    return bucket, f"{parent}/.{name}.upsert-kafka-ops.lock" if parent else f".{name}.upsert-kafka-ops.lock"


def store_error(uri: str, storage: S3Storage, exc: BaseException) -> ObjectStoreError:
    """A clear error for a store that refused a request or could not be reached."""
    where = storage.endpoint or "AWS S3"
    code = _code(exc)
    if code == "NoSuchBucket":
        why, fix = f"the bucket of {uri} does not exist on {where}", "create the bucket, or fix the path."
    elif code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "InvalidToken"):
        why = f"{where} refused the credentials for {uri} ({code})"
        fix = "check the access keys the pipeline's 'storage' section names, and that they may write the bucket."
    elif code is None:
        why = f"cannot reach {where} for {uri} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        fix = "check the store's endpoint and that it is up."
    else:
        why, fix = (
            f"{where} answered {code} for {uri}",
            "check the store and the pipeline's 'storage' section.",
        )
    return ObjectStoreError(f"{why}: {fix}")


def _code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    return str(
        response.get("Error", {}).get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    )


@contextmanager
def object_lock(
    uri: str,
    storage: S3Storage,
    timeout: float,
    wait: Callable[[Callable[[], bool], float, str], None],
    lease_s: float | None = None,
) -> Iterator[None]:
    """Hold the lock of the table at ``uri`` while the body runs.

    :param wait: ``wait(take, timeout, lock_name)``: calls ``take`` until it returns True (the
        runner's wait, which logs and raises on timeout).
    """
    lease = LEASE_S if lease_s is None else lease_s
    bucket, key = lock_key(uri)
    client = storage.client()  # first: it names the s3 extra when boto3 is missing
    from botocore.exceptions import BotoCoreError, ClientError

    body = json.dumps({"owner": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid()}).encode()
    held: dict[str, str] = {}

    def take() -> bool:
        try:
            held["etag"] = client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")["ETag"]
            return True
        except ClientError as exc:
            if _code(exc) not in _TAKEN:
                raise store_error(uri, storage, exc) from None
        except BotoCoreError as exc:
            raise store_error(uri, storage, exc) from None
        return _take_stale(client, bucket, key, body, lease, held)

    wait(take, timeout, f"s3a://{bucket}/{key}")
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(client, bucket, key, body, lease, held, stop), name="object-lock", daemon=True
    )
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        try:
            client.delete_object(Bucket=bucket, Key=key, IfMatch=held["etag"])
        except (ClientError, BotoCoreError) as exc:  # the lease expires by itself
            log.warning(
                "could not release the lock s3a://%s/%s (%s); it expires in %.0f s", bucket, key, exc, lease
            )


def _take_stale(client: Any, bucket: str, key: str, body: bytes, lease: float, held: dict[str, str]) -> bool:
    """Replace the lock when the store says its holder stopped renewing it ``lease`` seconds ago."""
    from botocore.exceptions import ClientError

    try:
        found = client.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False  # released a moment ago: the next try creates it
    now = parsedate_to_datetime(found["ResponseMetadata"]["HTTPHeaders"]["date"])
    age = (now - found["LastModified"]).total_seconds()
    if age < lease:
        return False
    try:
        held["etag"] = client.put_object(Bucket=bucket, Key=key, Body=body, IfMatch=found["ETag"])["ETag"]
    except ClientError:
        return False  # another waiting run replaced it first
    log.info("took over the lock s3a://%s/%s: its holder stopped renewing it %.0f s ago", bucket, key, age)
    return True


def _renew(
    client: Any, bucket: str, key: str, body: bytes, lease: float, held: dict[str, str], stop: threading.Event
) -> None:
    while not stop.wait(lease / 3):
        try:
            held["etag"] = client.put_object(Bucket=bucket, Key=key, Body=body, IfMatch=held["etag"])["ETag"]
        except Exception as exc:  # a renewal that fails is retried at the next third of the lease
            log.warning("could not renew the lock s3a://%s/%s: %s", bucket, key, exc)
