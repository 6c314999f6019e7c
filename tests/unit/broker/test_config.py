"""Broker settings: defaults < config file < SLIPSTREAM_* env < flags, with Kafka's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.broker.config import BrokerConfig, build


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    props = tmp_path / "broker.properties"
    props.write_text("# comment\nnum.partitions=4\nauto.create.topics.enable=false\nport=9100\n")
    config = build(str(props), {"SLIPSTREAM_PORT": "9200", "SLIPSTREAM_CONFIG": "ignored"}, {"port": 9300})
    assert config.default_partitions == 4
    assert config.auto_create_topics is False
    assert config.port == 9300
    assert build(str(props), {"SLIPSTREAM_PORT": "9200"}, None).port == 9200
    assert build(str(props), {}, None).port == 9100
    assert build(None, {}, None) == BrokerConfig()


def test_toml_file(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('data_dir = "/var/lib/slipstream"\n"group.initial.rebalance.delay.ms" = 0\n')
    config = build(str(toml), {}, None)
    assert config.data_dir == "/var/lib/slipstream"
    assert config.group_initial_rebalance_delay_ms == 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"no.such.key": "1"}, "unknown config key 'no.such.key'"),
        ({"num.partitions": "many"}, "expected an integer"),
        ({"auto.create.topics.enable": "perhaps"}, "expected true or false"),
        ({"num.partitions": "0"}, "default partitions must be at least 1"),
        ({"port": "70000"}, "port 70000 is out of range"),
        ({"group.consumer.migration.policy": "sideways"}, "group.consumer.migration.policy must be one of"),
        ({"cluster.commit.wait.ms": "-1"}, "cluster.commit.wait.ms must be 0 or more"),
    ],
)
def test_bad_settings_name_the_problem(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(None, {}, settings)


def test_bad_properties_line(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("num.partitions 3\n")
    with pytest.raises(ValueError, match=r"bad.properties:1: expected key=value"):
        build(str(props), {}, None)


def test_unrelated_slipstream_env_vars_are_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"SLIPSTREAM_HOME": "/opt/slipstream", "SLIPSTREAM_JAVA_JARS": "/x", "SLIPSTREAM_PORT": "9200"}
    with caplog.at_level("WARNING", logger="slipstream.broker.config"):
        config = build(None, env, None)
    assert config.port == 9200  # settings still apply
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "SLIPSTREAM_HOME" in warnings[0] and "SLIPSTREAM_JAVA_JARS" in warnings[0]
    # Unknown keys in a file or a flag are still refused.
    bad = tmp_path / "broker.properties"
    bad.write_text("home=/opt\n")
    with pytest.raises(ValueError, match="unknown config key 'home'"):
        build(str(bad), {}, None)
    with pytest.raises(ValueError, match="unknown config key 'home'"):
        build(None, {}, {"home": "/opt"})


def test_serve_starts_with_an_unrelated_slipstream_env_var(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "SLIPSTREAM_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "slipstream", "serve", "--port", "0", "--storage", "memory"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "listening on" in line or len(lines) > 50:
                break
        assert any("listening on" in line for line in lines), lines
        assert any("SLIPSTREAM_HOME" in line and "WARNING" in line for line in lines), lines
    finally:
        proc.kill()
        proc.wait()


def test_postgres_storage_from_file_env_and_its_needs(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('storage = "postgres"\ndatabase_url = "postgresql://a@db/x"\n')
    config = build(str(toml), {"SLIPSTREAM_DATABASE_URL": "postgresql://b@db/y"}, None)
    assert (config.storage, config.database_url) == ("postgres", "postgresql://b@db/y")
    # acks=all waits for the database commit whatever the durability setting says
    assert config.durability == "page-cache" and config.syncs_before_ack
    assert not BrokerConfig().syncs_before_ack
    assert BrokerConfig(durability="fsync").syncs_before_ack
    with pytest.raises(ValueError, match="needs a database URL"):
        build(None, {"SLIPSTREAM_STORAGE": "postgres"}, None)


def test_database_url_password_is_kept_out_of_the_log() -> None:
    from slipstream.broker.broker import _redacted

    assert _redacted("postgresql://app:s3cret@db:5432/k") == "postgresql://app:***@db:5432/k"
    assert _redacted("postgresql://app@db/k") == "postgresql://app@db/k"
    assert _redacted("postgresql://db/k") == "postgresql://db/k"


def test_migration_policy_reaches_the_coordinator() -> None:
    from slipstream.coordinator.config import MigrationPolicy

    config = build(None, {}, {"group.consumer.migration.policy": "Upgrade"})
    assert MigrationPolicy.parse(config.group_consumer_migration_policy) is MigrationPolicy.UPGRADE
    assert build(None, {}, {}).group_consumer_migration_policy == "bidirectional"



def test_the_commit_wait_applies_to_postgres_storage_only() -> None:
    """A commit round over PostgreSQL is a transaction worth sharing; on disk it is an
    fsync, whose rounds (durability=fsync) stay as they were."""
    settings = {"cluster.commit.wait.ms": "7", "database_url": "postgresql://db/x"}
    assert build(None, {}, {**settings, "storage": "postgres"}).commit_round_wait_s == 0.007
    assert build(None, {}, {**settings, "storage": "disk"}).commit_round_wait_s == 0.0
    assert build(None, {}, {"storage": "postgres", "database_url": "postgresql://db/x"}).commit_round_wait_s == 0.0
