"""Apache Iceberg catalogs that ``kind: iceberg`` targets name, as a pipeline's ``catalogs`` section.

A catalog is where Iceberg keeps each table's current metadata file; the data and metadata files
live under its warehouse folder (a local path or ``s3a://bucket/folder`` on a store of the
pipeline's ``storage`` section). Two kinds:

- ``jdbc``: the catalog is two tables in a PostgreSQL database (Iceberg's JdbcCatalog, the layout
  Spark and pyiceberg's SqlCatalog share): commits are atomic in the database, and other engines
  (Trino, Flink, pyiceberg) find the tables by name;
- ``hadoop``: the catalog is the warehouse folder itself (``version-hint.text``): no server, but
  one writer at a time (the runs of this project take a lock; other writers must not write).

One description maps to each reader's settings: Spark's ``spark.sql.catalog.<name>.*``
(:meth:`IcebergCatalog.spark_conf`) and pyiceberg's catalog (:meth:`IcebergCatalog.load_table`).

Example::

    catalogs:
      lake:
        type: jdbc
        uri: jdbc:postgresql://catalog-db:5432/iceberg
        user: iceberg
        password: env:ICEBERG_CATALOG_PASSWORD
        warehouse: s3a://lake/iceberg
        storage: minio
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field, model_validator

from upsert_kafka_ops.errors import SpecError, ToolchainError
from upsert_kafka_ops.spec.base import SpecModel
from upsert_kafka_ops.spec.connection import SecretRef
from upsert_kafka_ops.spec.storage import S3Storage, check_table_path, is_s3

#: a namespace and table name as Spark and pyiceberg both take them unquoted
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def iceberg_extra_missing(what: str) -> ToolchainError:
    """The error when the ``iceberg`` extra (pyiceberg) is not installed."""
    return ToolchainError(f"{what} needs the iceberg extra: pip install 'upsert-kafka-ops[iceberg]'.")


def split_table_name(name: str, field: str = "table") -> tuple[str, ...]:
    """``db.orders`` -> ``("db", "orders")``; a namespace of one or more levels, then the table."""
    parts = tuple(name.split("."))
    if len(parts) < 2 or not all(_IDENT.match(p) for p in parts):
        raise SpecError(
            field,
            f"{name!r} is not namespace.table.",
            "write e.g. db.orders (letters, digits and _ in each part).",
        )
    return parts


class IcebergCatalog(SpecModel):
    """An Iceberg catalog: PostgreSQL through JDBC, or a Hadoop catalog in the warehouse folder."""

    type: Literal["jdbc", "hadoop"] = Field(
        description="jdbc: the catalog lives in a PostgreSQL database (uri, user, password); hadoop: in "
        "the warehouse folder (one writer at a time)."
    )
    warehouse: str = Field(
        description="The folder tables are created under: a local path or s3a://bucket/folder."
    )
    storage: str | None = Field(
        default=None,
        description="For an s3a:// warehouse: the name of a store in the pipeline's 'storage' section; "
        "none: AWS S3 with the AWS credential chain.",
    )
    uri: str | None = Field(
        default=None,
        description="jdbc: the catalog database, jdbc:postgresql://host:port/database (query parameters "
        "such as ?sslmode=require are passed on).",
    )
    user: str | None = Field(default=None, description="jdbc: the database login.")
    password: SecretRef | None = Field(
        default=None, description="jdbc: the login's password reference (env or file)."
    )
    catalog_name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The catalog's name inside the database (a JDBC catalog keeps it in every row, so "
        "other engines must use the same); default: the catalog's name in this file.",
    )

    @model_validator(mode="after")
    def _check(self) -> IcebergCatalog:
        check_table_path(self.warehouse, self.storage, "warehouse")
        if self.type == "jdbc":
            if self.uri is None:
                raise SpecError(
                    "uri",
                    "a jdbc catalog needs the database it lives in.",
                    "write uri: jdbc:postgresql://host:5432/database.",
                )
            if not self.uri.startswith("jdbc:postgresql://") or not urlsplit(self.uri[5:]).hostname:
                raise SpecError(
                    "uri",
                    f"{self.uri!r} is not a PostgreSQL JDBC URL.",
                    "write jdbc:postgresql://host:5432/database (PostgreSQL is the catalog database "
                    "supported).",
                )
            if self.user is None:
                raise SpecError("user", "a jdbc catalog needs the database login.", "add user: <role>.")
        else:
            for name in ("uri", "user", "password"):
                if getattr(self, name) is not None:
                    raise SpecError(
                        name,
                        "a hadoop catalog keeps its tables in the warehouse folder and has no database.",
                        f"remove {name!r}, or use type: jdbc.",
                    )
        return self

    def warehouse_uri(self) -> str:
        """The warehouse as a URI Spark and pyiceberg both read (``file:`` for a local path)."""
        from pathlib import Path

        return self.warehouse if "://" in self.warehouse else Path(self.warehouse).absolute().as_uri()

    def location(self, table: str) -> str:
        """Where the catalog puts ``namespace.table`` by default: ``<warehouse>/<ns>/<table>``."""
        return "/".join([self.warehouse_uri().rstrip("/"), *split_table_name(table)])

    def name_in(self, key: str) -> str:
        """The catalog's name as engines use it: ``catalog_name``, else ``key`` (its pipeline name)."""
        return self.catalog_name or key

    # -- Spark ---------------------------------------------------------------------------------------
    def spark_conf(self, name: str) -> dict[str, str]:
        """``spark.sql.catalog.<name>.*`` for this catalog, the password resolved (for the run's
        session only: Spark redacts ``*password*`` keys wherever it shows them).

        :param name: the catalog's name as engines use it (:meth:`name_in`)."""
        prefix = f"spark.sql.catalog.{name}"
        conf = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": self.type,
            f"{prefix}.warehouse": self.warehouse_uri(),
            # every load of a table reads its current metadata: Iceberg's catalog cache (30 s by
            # default) kept a warm session (a worker's, a Spark Connect server's) on the snapshot it
            # loaded last, blind to a commit another process made since (a verify compared the
            # topic with an old table; a run would plan its MERGE against an old snapshot)
            f"{prefix}.cache-enabled": "false",
        }
        if self.type == "jdbc":
            assert self.uri is not None and self.user is not None
            conf[f"{prefix}.uri"] = self.uri
            conf[f"{prefix}.jdbc.user"] = self.user
            # V1: the layout with views' iceberg_type column, which pyiceberg's SqlCatalog also reads
            conf[f"{prefix}.jdbc.schema-version"] = "V1"
            if self.password is not None:
                conf[f"{prefix}.jdbc.password"] = self.password.resolve()
        return conf

    # -- pyiceberg -----------------------------------------------------------------------------------
    def sqlalchemy_url(self) -> Any:
        """The catalog database as a SQLAlchemy URL (psycopg 3), the password resolved."""
        from sqlalchemy.engine import URL

        assert self.uri is not None
        parts = urlsplit(self.uri[len("jdbc:") :])
        return URL.create(
            "postgresql+psycopg",
            username=self.user,
            password=self.password.resolve() if self.password is not None else None,
            host=parts.hostname,
            port=parts.port or 5432,
            database=parts.path.lstrip("/") or None,
            query=dict(parse_qsl(parts.query)),
        )

    def load_table(self, name: str, table: str, storage: S3Storage | None) -> Any | None:
        """The pyiceberg table ``namespace.table`` of this catalog, or None when it does not exist.

        :param name: the catalog's name as engines use it (:meth:`name_in`).
        :param storage: the store of an s3a:// warehouse.
        """
        try:
            from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
        except ImportError:
            raise iceberg_extra_missing(f"reading the Iceberg table {table}") from None
        io = storage.iceberg_io_options() if storage is not None and is_s3(self.warehouse) else {}
        ident = split_table_name(table)
        if self.type == "hadoop":
            from pyiceberg.table import StaticTable

            location = self.location(table)
            try:
                return StaticTable.from_metadata(location, properties=io)
            except FileNotFoundError:
                return None
        from pyiceberg.catalog.sql import SqlCatalog
        from sqlalchemy.exc import ProgrammingError

        url = self.sqlalchemy_url().render_as_string(hide_password=False)
        # init_catalog_tables false: a reader never creates the catalog's tables
        catalog = SqlCatalog(name, uri=url, init_catalog_tables="false", **io)
        try:
            return catalog.load_table(ident)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        except ProgrammingError as exc:  # no catalog tables yet: no Iceberg table was ever created
            if "iceberg_tables" in str(exc):
                return None
            raise
        finally:
            catalog.engine.dispose()
