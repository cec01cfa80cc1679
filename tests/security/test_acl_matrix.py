"""Every API a client uses, authorized as Kafka 3.9 authorizes it, on a kafkette broker with Kafka's
AclAuthorizer configured: see tests/security/acl_matrix.py for the cases and how the subject and the
administrator are told apart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from clients.devcluster import LocalCluster
from tests.conftest import attach_cluster
from tests.security.acl_matrix import BROKER_OVERRIDES, AclZk, admin_acls, run_matrix


def prepare_acls(zk_connect: str, chroot: str) -> AclZk:
    """The administrator's ACLs, in ZooKeeper before any broker reads them."""
    root = KazooClient(hosts=zk_connect, timeout=20)
    root.start(timeout=20)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    zk = AclZk(zk_connect + chroot)
    admin_acls(zk)
    return zk


@pytest.fixture
def authorized_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[Any, AclZk]]:
    cluster = LocalCluster(1, overrides=BROKER_OVERRIDES, metrics_base_port=None)
    zk: AclZk | None = None
    try:
        cluster.zk.start()
        zk = prepare_acls(cluster.zk.connect_string, cluster.chroot)
        cluster.start()
        attach_cluster(request, cluster)
        yield cluster, zk
    finally:
        if zk is not None:
            zk.close()
        cluster.__exit__(None, None, None)


def test_acl_matrix_kafkette(authorized_cluster: tuple[Any, AclZk]) -> None:
    cluster, zk = authorized_cluster
    observed = run_matrix(cluster.bootstrap, zk)
    assert len(observed) > 150


def test_update_metadata_v8_layout_is_kafkas() -> None:
    """kafkette's UpdateMetadata v8 is byte for byte Kafka's: ``Type`` is tagged field 0, left out at its
    default (the Java-class cross-check covers the rest). The matrix still builds Kafka's request with
    its own helper, which now agrees with ours."""
    from protocol.api_versions import ApiKey
    from protocol.messages import request_type
    from tests.security.acl_matrix import kafka_update_metadata_v8

    mt = request_type(ApiKey.UPDATE_METADATA)
    ours = bytes(mt.encode(mt(controller_id=0, is_k_raft_controller=False, type=0, controller_epoch=1,
                              broker_epoch=0, topic_states=[], live_brokers=[]), 8))
    assert ours == kafka_update_metadata_v8(controller_id=0, controller_epoch=1, broker_epoch=0)
