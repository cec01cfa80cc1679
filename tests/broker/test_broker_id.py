"""Which id a broker runs as when broker.id is -1, and Kafka's checks of a configured one."""

from __future__ import annotations

import pytest

from broker.broker_id import check_configured_broker_id, stored_broker_id
from config.registry import BrokerConfig, ConfigError


def config(**props: str) -> BrokerConfig:
    return BrokerConfig({"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x",
                         **{k.replace("_", "."): v for k, v in props.items()}})


def test_configured_ids_are_checked_as_kafka_checks_them() -> None:
    for ok in ("-1", "0", "1000"):
        check_configured_broker_id(config(broker_id=ok))
    with pytest.raises(ConfigError, match="greater than or equal to -1 and not greater than reserved.broker.max.id"):
        check_configured_broker_id(config(broker_id="1001"))
    with pytest.raises(ConfigError, match="greater than or equal to -1"):
        check_configured_broker_id(config(broker_id="-2"))
    check_configured_broker_id(config(broker_id="5000", reserved_broker_max_id="5000"))
    # Without generation any id of 0 or more is allowed, and -1 is not.
    cfg = BrokerConfig({"zookeeper.connect": "z:2181", "log.dirs": "/tmp/x", "broker.id": "7000",
                        "broker.id.generation.enable": "false"})
    check_configured_broker_id(cfg)
    cfg = BrokerConfig({"zookeeper.connect": "z:2181", "log.dirs": "/tmp/x", "broker.id.generation.enable": "false"})
    with pytest.raises(ConfigError, match="broker.id must be greater than or equal to 0"):
        check_configured_broker_id(cfg)


def test_stored_id_comes_from_meta_properties_and_must_agree(tmp_path) -> None:
    d1, d2, d3 = (tmp_path / n for n in ("d1", "d2", "d3"))
    for d in (d1, d2, d3):
        d.mkdir()
    assert stored_broker_id([str(d1), str(d2)]) is None
    (d1 / "meta.properties").write_text("version=0\nbroker.id=1001\ncluster.id=abc\n")
    assert stored_broker_id([str(d1), str(d2)]) == 1001  # a dir without one (new, or emptied) is fine
    (d2 / "meta.properties").write_text("version=0\nbroker.id=1001\ncluster.id=abc\n")
    assert stored_broker_id([str(d1), str(d2)]) == 1001
    (d3 / "meta.properties").write_text("version=0\nbroker.id=1002\ncluster.id=abc\n")
    with pytest.raises(ConfigError, match="Stored node id 1002 doesn't match previous node id 1001"):
        stored_broker_id([str(d1), str(d2), str(d3)])
