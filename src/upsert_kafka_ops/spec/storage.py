"""Object storage a pipeline keeps its warehouse tables on: S3 and S3-compatible stores.

A pipeline's ``storage`` section names stores the way ``connections`` names Kafka clusters; a target
on ``s3a://bucket/...`` (or ``s3://``) names one with its ``storage`` field. One store maps to the
settings each reader needs, all from this one description:

- Spark's S3A connector (:meth:`S3Storage.hadoop_conf`, per-bucket ``fs.s3a.bucket.<b>.*`` keys, set
  on the run's session so that two stores never share settings);
- delta-rs and pyiceberg's object_store options (:meth:`S3Storage.object_store_options`);
- pyarrow's :class:`~pyarrow.fs.S3FileSystem` (:meth:`S3Storage.filesystem`);
- boto3 for the run lock (:meth:`S3Storage.client`).

Credentials are secret references (``env:``/``file:``), resolved only where a client is built. With
none given, every client uses the AWS default chain (environment, profile, instance or pod role).

Example::

    storage:
      lake:
        endpoint: http://127.0.0.1:9000
        path_style_access: true
        access_key_id: env:AWS_ACCESS_KEY_ID
        secret_access_key: env:AWS_SECRET_ACCESS_KEY
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError, ToolchainError
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import SecretRef

#: the URI schemes of S3 paths; Spark reads and writes them through its S3A connector
S3_SCHEMES = ("s3a", "s3")


def is_s3(uri: str | None) -> bool:
    """Whether ``uri`` is an S3 path (``s3a://bucket/key`` or ``s3://bucket/key``)."""
    return uri is not None and urlparse(uri).scheme in S3_SCHEMES and "://" in uri


def split_s3(uri: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` -> ``("bucket", "a/b")``."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.strip("/")


def s3_extra_missing(what: str) -> ToolchainError:
    """The error when the ``s3`` extra's libraries (delta-rs, pyarrow, boto3) are not installed."""
    return ToolchainError(f"{what} needs the s3 extra: pip install 'upsert-kafka-ops[s3]'.")


def check_table_path(
    path: str | None, storage: str | None, field: str = "path", storage_field: str = "storage"
) -> None:
    """A folder's path (a table's, a checkpoint's) is a local path, ``file:`` or
    ``s3a://bucket/folder``; a store's name (``storage_field``) goes with an s3a:// path only."""
    if path is None:
        if storage is not None:
            raise SpecError(storage_field, f"there is no {field}.", "remove it, or add one.")
        return
    scheme = urlparse(path).scheme if "://" in path else ""
    if scheme == "s3":
        raise SpecError(
            field, f"{path!r}: Spark writes S3 through its S3A connector.", "write it as s3a://..."
        )
    if scheme not in ("", "file", "s3a"):
        raise SpecError(
            field,
            f"{path!r}: the {scheme}:// scheme is not supported (the stored offsets live beside the "
            "table and are read without Spark).",
            "use a local or mounted path, or s3a://bucket/key.",
        )
    if scheme == "s3a" and not split_s3(path)[1]:
        raise SpecError(field, f"{path!r} names a bucket but no folder.", "write s3a://bucket/folder.")
    if storage is not None and scheme != "s3a":
        raise SpecError(
            storage_field, f"the path {path!r} is not on object storage.", f"remove '{storage_field}'."
        )


class S3Storage(SpecModel):
    """An S3 or S3-compatible object store (MinIO, Ceph, SeaweedFS, cloud stores with an S3 API)."""

    kind: Literal["s3"] = Field(default="s3", description="Storage kind.")
    endpoint: str | None = Field(
        default=None,
        description="The store's URL, e.g. http://minio:9000; default: AWS S3 for the region.",
    )
    region: str | None = Field(
        default=None, description="The region (AWS: the bucket's region; others: often us-east-1)."
    )
    path_style_access: bool = Field(
        default=False,
        description="Address buckets as endpoint/bucket (most S3-compatible stores) instead of bucket.endpoint.",
    )
    access_key_id: SecretRef | None = Field(
        default=None, description="Access key reference (env or file); default: the AWS credential chain."
    )
    secret_access_key: SecretRef | None = Field(
        default=None, description="Secret key reference (env or file); given together with access_key_id."
    )
    session_token: SecretRef | None = Field(
        default=None, description="Session token reference, for temporary credentials."
    )

    @model_validator(mode="after")
    def _check(self) -> S3Storage:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            given = "access_key_id" if self.access_key_id is not None else "secret_access_key"
            missing = "secret_access_key" if given == "access_key_id" else "access_key_id"
            raise SpecError(
                missing,
                f"{given} is set but {missing} is not.",
                "give both keys, or neither to use the AWS credential chain (environment, profile, role).",
            )
        if self.session_token is not None and self.access_key_id is None:
            raise SpecError("session_token", "a session token needs access_key_id and secret_access_key.")
        if self.endpoint is not None and urlparse(self.endpoint).scheme not in ("http", "https"):
            raise SpecError(
                "endpoint", f"{self.endpoint!r} is not an http(s) URL.", "write it as http://host:port."
            )
        return self

    # -- clients -------------------------------------------------------------------------------------
    def _keys(self) -> tuple[str, str, str | None] | None:
        if self.access_key_id is None or self.secret_access_key is None:
            return None
        token = self.session_token.resolve() if self.session_token is not None else None
        return self.access_key_id.resolve(), self.secret_access_key.resolve(), token

    def hadoop_conf(self, bucket: str) -> dict[str, str]:
        """S3A settings for ``bucket`` (``fs.s3a.bucket.<bucket>.*``), secrets resolved: for the run's
        session only, never a command line."""
        conf: dict[str, str] = {"path.style.access": str(self.path_style_access).lower()}
        if self.endpoint is not None:
            conf["endpoint"] = self.endpoint
            conf["connection.ssl.enabled"] = str(self.endpoint.startswith("https")).lower()
        if self.region is not None:
            conf["endpoint.region"] = self.region
        keys = self._keys()
        if keys is not None:
            access, secret, token = keys
            conf["access.key"], conf["secret.key"] = access, secret
            if token is not None:
                conf["session.token"] = token
                conf["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                conf["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return {f"fs.s3a.bucket.{bucket}.{k}": v for k, v in conf.items()}

    def object_store_options(self) -> dict[str, str]:
        """delta-rs (Rust object_store) options, secrets resolved."""
        opts: dict[str, str] = {"AWS_REGION": self.region or "us-east-1"}
        if self.endpoint is not None:
            opts["AWS_ENDPOINT_URL"] = self.endpoint
            if self.endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = str(not self.path_style_access).lower()
        keys = self._keys()
        if keys is not None:
            opts["AWS_ACCESS_KEY_ID"], opts["AWS_SECRET_ACCESS_KEY"] = keys[0], keys[1]
            if keys[2] is not None:
                opts["AWS_SESSION_TOKEN"] = keys[2]
        return opts

    def iceberg_io_options(self) -> dict[str, str]:
        """pyiceberg's S3 FileIO properties (``s3.*``), secrets resolved; bounded connect and request
        times, so an unreachable store is an error in seconds."""
        opts: dict[str, str] = {
            "s3.region": self.region or "us-east-1",
            "s3.connect-timeout": "5",
            "s3.request-timeout": "10",
        }
        if self.endpoint is not None:
            opts["s3.endpoint"] = self.endpoint
        opts["s3.force-virtual-addressing"] = str(not self.path_style_access).lower()
        keys = self._keys()
        if keys is not None:
            opts["s3.access-key-id"], opts["s3.secret-access-key"] = keys[0], keys[1]
            if keys[2] is not None:
                opts["s3.session-token"] = keys[2]
        return opts

    def filesystem(self) -> Any:
        """A :class:`pyarrow.fs.S3FileSystem` on this store (paths ``bucket/key``)."""
        try:
            from pyarrow.fs import S3FileSystem
        except ImportError:
            raise s3_extra_missing("S3's pyarrow filesystem") from None

        kwargs: dict[str, Any] = {"region": self.region or "us-east-1"}
        if self.endpoint is not None:
            parsed = urlparse(self.endpoint)
            kwargs["endpoint_override"], kwargs["scheme"] = parsed.netloc, parsed.scheme
        kwargs["force_virtual_addressing"] = not self.path_style_access
        keys = self._keys()
        if keys is not None:
            kwargs["access_key"], kwargs["secret_key"] = keys[0], keys[1]
            if keys[2] is not None:
                kwargs["session_token"] = keys[2]
        return S3FileSystem(**kwargs)

    def client(self, timeout_s: float = 10.0) -> Any:
        """A boto3 S3 client on this store (the run lock's conditional writes)."""
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise s3_extra_missing("the S3 run lock (boto3)") from None

        keys = self._keys()
        config = Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path" if self.path_style_access else "auto"},
        )
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region or "us-east-1",
            aws_access_key_id=keys[0] if keys else None,
            aws_secret_access_key=keys[1] if keys else None,
            aws_session_token=keys[2] if keys else None,
            config=config,
        )
