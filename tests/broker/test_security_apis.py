"""SASL, ACL, client-quota and SCRAM APIs against a live broker (real ZooKeeper, raw protocol).

A PLAINTEXT-only broker without an authorizer answers these as Kafka does in ZooKeeper mode:
SASL is out of place (ILLEGAL_SASL_STATE), ACL APIs say SECURITY_DISABLED, and quotas and SCRAM
credentials are stored as entity configs in ZooKeeper and described back from there.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import decode_response, encode_request, request_type

VERSIONS = {ApiKey.SASL_HANDSHAKE: 1, ApiKey.SASL_AUTHENTICATE: 2, ApiKey.DESCRIBE_ACLS: 3,
            ApiKey.CREATE_ACLS: 3, ApiKey.DELETE_ACLS: 3, ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
            ApiKey.ALTER_CLIENT_QUOTAS: 1, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1) as c:
        yield c


def call(cluster: LocalCluster, api: ApiKey, **fields: Any) -> Any:
    b = cluster.brokers[0]
    with socket.create_connection((b.host, b.port), timeout=30) as s:
        v = VERSIONS[api]
        s.sendall(encode_request(api, v, 7, "test", request_type(api)(**fields)))
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        return decode_response(api, v, s.recv(n, socket.MSG_WAITALL))[1]


def test_sasl_on_plaintext_listener_is_illegal_state(cluster: LocalCluster) -> None:
    assert call(cluster, ApiKey.SASL_HANDSHAKE, mechanism="PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert call(cluster, ApiKey.SASL_AUTHENTICATE, auth_bytes=b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_acls_without_authorizer_are_security_disabled(cluster: LocalCluster) -> None:
    mt = request_type(ApiKey.CREATE_ACLS)
    resp = call(cluster, ApiKey.DESCRIBE_ACLS, resource_type_filter=1, pattern_type_filter=1, operation=1,
                permission_type=1)
    assert resp.error_code == ErrorCode.SECURITY_DISABLED
    resp = call(cluster, ApiKey.CREATE_ACLS, creations=[mt.AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
        operation=3, permission_type=3)])
    assert [r.error_code for r in resp.results] == [ErrorCode.SECURITY_DISABLED]


def test_client_quotas_round_trip_through_zookeeper(cluster: LocalCluster) -> None:
    aq = request_type(ApiKey.ALTER_CLIENT_QUOTAS)
    dq = request_type(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    entity = [aq.EntityData(entity_type="user", entity_name="alice smith"),
              aq.EntityData(entity_type="client-id", entity_name="app-1")]
    resp = call(cluster, ApiKey.ALTER_CLIENT_QUOTAS, entries=[aq.EntryData(entity=entity, ops=[
        aq.OpData(key="producer_byte_rate", value=1048576.0), aq.OpData(key="request_percentage", value=50.5)])])
    assert [e.error_code for e in resp.entries] == [0]
    # Stored where Kafka stores it, with the user name sanitized.
    zk = KazooClient(cluster.zk.connect_string + cluster.chroot)
    zk.start()
    try:
        data, _ = zk.get("/config/users/alice%20smith/clients/app-1")
        assert b'"producer_byte_rate": "1048576"' in data or b'"producer_byte_rate":"1048576"' in data
    finally:
        zk.stop()
    resp = call(cluster, ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[
        dq.ComponentData(entity_type="user", match_type=0, match="alice smith")], strict=False)
    assert resp.error_code == 0
    [entry] = resp.entries
    assert {(e.entity_type, e.entity_name) for e in entry.entity} == {("user", "alice smith"), ("client-id", "app-1")}
    assert {v.key: v.value for v in entry.values} == {"producer_byte_rate": 1048576.0, "request_percentage": 50.5}
    # strict: an entity with more types than the filter does not match
    resp = call(cluster, ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[
        dq.ComponentData(entity_type="user", match_type=0, match="alice smith")], strict=True)
    assert resp.entries == []
    bad = call(cluster, ApiKey.ALTER_CLIENT_QUOTAS, entries=[aq.EntryData(entity=entity, ops=[
        aq.OpData(key="no_such_quota", value=1.0)])])
    assert bad.entries[0].error_code == ErrorCode.INVALID_REQUEST


def test_scram_credentials_upsert_describe_delete(cluster: LocalCluster) -> None:
    al = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    ds = request_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", b"secret", salt, 8192)
    resp = call(cluster, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletions=[], upsertions=[
        al.ScramCredentialUpsertion(name="bob", mechanism=1, iterations=8192, salt=salt, salted_password=salted)])
    assert [(r.user, r.error_code) for r in resp.results] == [("bob", 0)]
    resp = call(cluster, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=[ds.UserName(name="bob")])
    [r] = resp.results
    assert r.error_code == 0 and [(c.mechanism, c.iterations) for c in r.credential_infos] == [(1, 8192)]
    low = call(cluster, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletions=[], upsertions=[
        al.ScramCredentialUpsertion(name="carol", mechanism=1, iterations=100, salt=salt, salted_password=salted)])
    assert low.results[0].error_code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    resp = call(cluster, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, upsertions=[], deletions=[
        al.ScramCredentialDeletion(name="bob", mechanism=1)])
    assert resp.results[0].error_code == 0
    resp = call(cluster, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=[ds.UserName(name="bob")])
    assert resp.results[0].error_code == ErrorCode.RESOURCE_NOT_FOUND
