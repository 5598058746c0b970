"""The pipeline's ``storage`` section and targets on S3: what is refused (with the field and the fix),
and what each client is given."""

from __future__ import annotations

from typing import Any

import pytest

from upsert_kafka_ops.errors import OldFieldWarning, SpecError
from upsert_kafka_ops.jobs import Pipeline
from upsert_kafka_ops.jobs.object_lock import lock_key
from upsert_kafka_ops.pipeline import Folder
from upsert_kafka_ops.spec.storage import S3Storage

SOURCE = {
    "connection": "main",
    "table": {"ddl": "CREATE TABLE u (id BIGINT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
              "'connector'='upsert-kafka','topic'='u','key.format'='json','value.format'='json')"},
}  # fmt: skip


def _pipeline(target: dict[str, Any], storage: dict[str, Any] | None = None) -> Pipeline:
    return Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": "127.0.0.1:9092"}},
        "storage": storage or {},
        "jobs": [{"name": "u", "kind": "materialize", "source": SOURCE, "target": target}],
    })  # fmt: skip


LAKE = {"endpoint": "http://127.0.0.1:9000", "path_style_access": True,
        "access_key_id": "env:AK", "secret_access_key": "env:SK"}  # fmt: skip


@pytest.mark.parametrize(
    ("target", "storage", "field", "fix"),
    [
        ({"kind": "delta", "path": "s3://lake/u"}, None, "path", "s3a://"),
        ({"kind": "parquet", "path": "gs://lake/u"}, None, "path", "s3a://bucket/key"),
        ({"kind": "delta", "path": "s3a://lake"}, None, "path", "s3a://bucket/folder"),
        ({"kind": "delta", "path": "/data/u", "storage": "lake"}, {"lake": LAKE}, "storage", "remove"),
        ({"kind": "delta", "path": "s3a://lake/u", "storage": "lakee"}, {"lake": LAKE}, "storage", "lake"),
    ],
)
def test_a_target_path_or_store_that_cannot_work_is_refused_with_the_field_and_the_fix(
    target: dict[str, Any], storage: dict[str, Any] | None, field: str, fix: str
) -> None:
    with pytest.raises(SpecError) as info:
        _pipeline(target, storage)
    assert field in info.value.field and fix in str(info.value)


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"access_key_id": "env:AK"}, "secret_access_key"),
        ({"secret_access_key": "env:SK"}, "access_key_id"),
        ({"session_token": "env:T"}, "session_token"),
        ({"endpoint": "127.0.0.1:9000"}, "endpoint"),
        ({"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "env:SK"}, ""),  # a literal key
    ],
)
def test_a_store_with_half_its_credentials_or_a_literal_key_is_refused(
    given: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpecError) as info:
        S3Storage.model_validate(given)
    assert field in info.value.field


def test_each_client_gets_the_stores_settings_and_secrets_stay_references_until_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AK", "access-1")
    monkeypatch.setenv("SK", "secret-1")
    pipeline = _pipeline({"kind": "delta", "path": "s3a://lake/db/u", "storage": "lake"}, {"lake": LAKE})
    store = pipeline.storage_of(pipeline.job("u").target)
    assert store is not None
    assert store.hadoop_conf("lake") == {
        "fs.s3a.bucket.lake.path.style.access": "true",
        "fs.s3a.bucket.lake.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.bucket.lake.connection.ssl.enabled": "false",
        "fs.s3a.bucket.lake.access.key": "access-1",
        "fs.s3a.bucket.lake.secret.key": "secret-1",
        "fs.s3a.bucket.lake.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    opts = store.object_store_options()
    assert (opts["AWS_ENDPOINT_URL"], opts["AWS_ALLOW_HTTP"], opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"]) == (
        "http://127.0.0.1:9000", "true", "false")  # fmt: skip
    assert (opts["AWS_ACCESS_KEY_ID"], opts["AWS_SECRET_ACCESS_KEY"]) == ("access-1", "secret-1")
    text = pipeline.to_yaml() + repr(pipeline) + str(store)
    assert "secret-1" not in text and "access-1" not in text and "env: SK" in pipeline.to_yaml()
    # the driver receives the store its job names, and Spark the S3A connector
    assert pipeline.only("u").storage == {"lake": store}
    assert pipeline.jar_groups("u") == ("spark", "s3")


def test_a_target_on_s3_that_names_no_store_uses_aws_and_its_credential_chain() -> None:
    pipeline = _pipeline({"kind": "parquet", "path": "s3a://lake/u"})
    store = pipeline.storage_of(pipeline.job("u").target)
    assert store == S3Storage()
    assert store.hadoop_conf("lake") == {"fs.s3a.bucket.lake.path.style.access": "false"}
    local = _pipeline({"kind": "delta", "path": "/data/u"})
    assert local.storage_of(local.job("u").target) is None and local.jar_groups("u") == ("spark",)


def test_the_run_lock_lives_beside_the_table_where_an_overwrite_never_removes_it() -> None:
    assert lock_key("s3a://lake/db/users") == ("lake", "db/.users.upsert-kafka-ops.lock")
    assert lock_key("s3a://lake/users/") == ("lake", ".users.upsert-kafka-ops.lock")


STREAM = {"name": "s", "kind": "topic-to-topic", "query": "SELECT * FROM c",
          "sources": {"c": {"kind": "kafka", "connection": "main", "table": {"name": "c", "columns": [
              {"name": "id", "type": "BIGINT"}], "options": {"connector": "kafka", "topic": "c", "format": "json"}}}},
          "sink": SOURCE}  # fmt: skip
PUBLISH = {"name": "p", "kind": "publish", "sink": SOURCE, "source": {"kind": "delta-cdf", "path": "/data/t"}}


@pytest.mark.parametrize(
    ("job", "field", "fix"),
    [
        ({**STREAM, "checkpoint_location": "s3://lake/c"}, "checkpoint_location", "s3a://"),
        ({**STREAM, "checkpoint_location": "/c", "checkpoint_storage": "lake"}, "checkpoint_storage", "remove"),
        ({**STREAM, "checkpoint_storage": "lake"}, "checkpoint_storage", "add one"),
        ({**STREAM, "checkpoint": {"path": "s3a://lake/c", "storage": "lakee"}}, "checkpoint.storage",
         "defined: lake"),
        ({**STREAM, "checkpoint": {"path": "s3://lake/c"}}, "checkpoint.path", "s3a://"),
        ({**STREAM, "checkpoint": {"storage": "lake"}}, "checkpoint.path", "not given"),
        ({**PUBLISH, "state": {"path": "/s", "storage": "lake"}}, "state.storage", "remove"),
        ({**PUBLISH, "source": {"kind": "delta-cdf", "path": "s3a://lake/t", "storage": "lakee"}}, "source.storage",
         "defined: lake"),
        ({**PUBLISH, "source": {"kind": "delta-cdf", "path": "gs://lake/t"}}, "path", "s3a://bucket/key"),
        ({**PUBLISH, "state_path": "/s", "state_storage": "lake"}, "state_storage", "remove"),
    ],
)  # fmt: skip
def test_a_checkpoint_or_publish_folder_that_cannot_work_is_refused_with_the_field_and_the_fix(
    job: dict[str, Any], field: str, fix: str
) -> None:
    with pytest.raises(SpecError) as info:
        Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "127.0.0.1:9092"}},
                                 "storage": {"lake": LAKE}, "jobs": [job]})  # fmt: skip
    assert field in info.value.field and fix in str(info.value)


def test_a_checkpoint_or_a_published_table_on_s3_brings_its_store_and_the_s3_jars() -> None:
    other = {**LAKE, "endpoint": "http://127.0.0.1:9001"}
    pipeline = Pipeline.model_validate({
        "connections": {"main": {"bootstrap_servers": "127.0.0.1:9092"}},
        "storage": {"lake": LAKE, "other": other, "unused": LAKE},
        "jobs": [{**STREAM, "checkpoint_location": "s3a://lake/c", "checkpoint_storage": "lake"},
                 {**PUBLISH, "source": {"kind": "delta-cdf", "path": "s3a://lake/t", "storage": "lake"},
                  "state_path": "s3a://state/p", "state_storage": "other"},
                 {**PUBLISH, "name": "q"}],
    })  # fmt: skip
    assert pipeline.jar_groups("s") == pipeline.jar_groups("p") == ("spark", "s3")
    assert pipeline.jar_groups("q") == ("spark",)
    assert set(pipeline.only("s").storage) == {"lake"} and set(pipeline.only("p").storage) == {
        "lake",
        "other",
    }
    assert pipeline.checkpoint_storage_of(pipeline.job("s")) == pipeline.storage["lake"]
    assert pipeline.publish_state_of(pipeline.job("p")) == ("s3a://state/p", pipeline.storage["other"])  # type: ignore[arg-type]
    assert pipeline.publish_state_of(pipeline.job("q")) == ("/data/t", None)  # type: ignore[arg-type]


def test_a_folder_given_in_the_old_pair_of_fields_still_reads_and_the_warning_names_the_new_form() -> None:
    def load(job: dict[str, Any]) -> Pipeline:
        return Pipeline.model_validate({"connections": {"main": {"bootstrap_servers": "127.0.0.1:9092"}},
                                        "storage": {"lake": LAKE}, "jobs": [job]})  # fmt: skip

    with pytest.warns(OldFieldWarning) as said:
        old = load({**STREAM, "checkpoint_location": "s3a://lake/c", "checkpoint_storage": "lake"})
    assert old.job("s") == load({**STREAM, "checkpoint": {"path": "s3a://lake/c", "storage": "lake"}}).job(
        "s"
    )
    (warning,) = said
    assert str(warning.message).startswith(
        "job 's': checkpoint_location and checkpoint_storage are the old form of 'checkpoint'; "
        "write checkpoint: {path: s3a://lake/c, storage: lake}."
    )
    with pytest.warns(
        OldFieldWarning, match="state_path is the old form of 'state'; write state: {path: /s}"
    ):
        assert load({**PUBLISH, "state_path": "/s"}).job("p").state == Folder(path="/s")  # type: ignore[union-attr]
    assert "checkpoint_location" not in old.to_yaml() and "checkpoint:" in old.to_yaml()
    with pytest.warns(OldFieldWarning, match="They replace the 'checkpoint' also given"):
        both = load({**STREAM, "checkpoint_location": "/c2", "checkpoint": {"path": "/c"}})
    assert both.job("s").checkpoint == Folder(path="/c2")  # type: ignore[union-attr]
