"""Security-related APIs as a ZooKeeper-mode Kafka broker with PLAINTEXT listeners answers them.

- SASL: our listeners are PLAINTEXT, so a SaslHandshake or SaslAuthenticate is out of place there:
  ILLEGAL_SASL_STATE, as Kafka answers on a non-SASL listener.
- ACLs: Describe/Create/DeleteAcls are served by broker/handlers_acls.py.
- Client quotas and SCRAM credentials are stored where Kafka stores them in ZooKeeper mode, as
  entity configs (``/config/users/<user>``, ``/config/users/<user>/clients/<client>``,
  ``/config/clients/<client>``, ``/config/ips/<ip>``, ``<default>`` for defaults; user names
  sanitized like Kafka's Sanitizer), with change notifications, and described back from there.
  Quotas are recorded, not yet enforced (no request throttling): see the README.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
from typing import TYPE_CHECKING, Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.kafka_apis import KafkaApis
    from broker.wiring import ZkCall
    from controller.zk_client import KafkaZkClient
    from protocol.messages import Request

DEFAULT = "<default>"
QUOTA_KEYS = {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
IP_QUOTA_KEYS = {"connection_creation_rate"}
ENTITY_TYPES = ("user", "client-id", "ip")
SCRAM_MECHANISMS = {1: ("SCRAM-SHA-256", hashlib.sha256), 2: ("SCRAM-SHA-512", hashlib.sha512)}
SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS = 4096, 16384
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

_SH = response_type(ApiKey.SASL_HANDSHAKE)
_SA = response_type(ApiKey.SASL_AUTHENTICATE)
_DQ = response_type(ApiKey.DESCRIBE_CLIENT_QUOTAS)
_AQ = response_type(ApiKey.ALTER_CLIENT_QUOTAS)
_DS = response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
_AS = response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encode, with '*' and ' ' encoded too (so names are safe znode names)."""
    return urllib.parse.quote(name, safe="-_.")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def scram_credential(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> str:
    """The stored form of a SCRAM credential (RFC 5802 keys), as Kafka's ScramCredentialUtils writes it."""
    _name, digest = SCRAM_MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")

    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


def _quota_path(entity: dict[str, str | None]) -> tuple[str, str]:
    """(entity type, entity name) of the config znode holding this quota entity's values."""

    def enc(v: str | None) -> str:
        return sanitize(v) if v is not None else DEFAULT

    if "ip" in entity:
        return "ips", entity["ip"] if entity["ip"] is not None else DEFAULT
    if "user" in entity:
        base = enc(entity["user"])
        if "client-id" in entity:
            return "users", f"{base}/clients/{enc(entity['client-id'])}"
        return "users", base
    return "clients", enc(entity["client-id"])


class SecurityHandlers:
    """SASL, ACLs, client quotas and SCRAM credentials (the last two stored in ZooKeeper's /config)."""

    def __init__(self, zk: KafkaZkClient, zk_call: ZkCall) -> None:
        self.zk = zk
        self.zk_call = zk_call

    # -- SASL and ACLs ---------------------------------------------------------------------------------

    async def sasl_handshake(self, conn: Connection, req: Request) -> Any:
        return _SH(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    async def sasl_authenticate(self, conn: Connection, req: Request) -> Any:
        return _SA(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                   error_message="SASL is not enabled on this listener")

    # -- client quotas ---------------------------------------------------------------------------------

    async def _all_quota_entities(self) -> list[tuple[dict[str, str | None], dict[str, str]]]:
        zk = self.zk
        out: list[tuple[dict[str, str | None], dict[str, str]]] = []

        def name_of(raw: str) -> str | None:
            return None if raw == DEFAULT else desanitize(raw)

        for ctype, etype in (("clients", "client-id"), ("users", "user"), ("ips", "ip")):
            names = await self.zk_call(zk.get_all_entities_with_config, ctype)
            for raw in names:
                cfg = await self.zk_call(zk.get_entity_config, ctype, raw)
                quotas = {k: v for k, v in cfg.items() if k in QUOTA_KEYS | IP_QUOTA_KEYS}
                if quotas:
                    out.append(({etype: name_of(raw)}, quotas))
                if ctype == "users":
                    children = await self.zk_call(zk.get_children, f"/config/users/{raw}/clients") or []
                    for craw in children:
                        ccfg = await self.zk_call(zk.get_entity_config, "users", f"{raw}/clients/{craw}")
                        cq = {k: v for k, v in ccfg.items() if k in QUOTA_KEYS}
                        if cq:
                            out.append(({"user": name_of(raw), "client-id": name_of(craw)}, cq))
        return out

    async def describe_client_quotas(self, conn: Connection, req: Request) -> Any:
        b = req.body
        comps = {}
        for c in b.components:
            if c.entity_type not in ENTITY_TYPES or c.entity_type in comps:
                return _DQ(error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"invalid or repeated entity type {c.entity_type!r}", entries=None)
            if c.match_type == MATCH_EXACT and c.match is None:
                return _DQ(error_code=ErrorCode.INVALID_REQUEST, error_message="exact match needs a name",
                           entries=None)
            comps[c.entity_type] = (c.match_type, c.match)
        entries = []
        for entity, quotas in await self._all_quota_entities():
            if b.strict and set(entity) != set(comps):
                continue
            ok = True
            for etype, (mtype, match) in comps.items():
                if etype not in entity:
                    ok = False
                elif mtype == MATCH_EXACT and entity[etype] != match:
                    ok = False
                elif mtype == MATCH_DEFAULT and entity[etype] is not None:
                    ok = False
            if not ok:
                continue
            entries.append(_DQ.EntryData(
                entity=[_DQ.EntityData(entity_type=t, entity_name=n) for t, n in sorted(entity.items())],
                values=[_DQ.ValueData(key=k, value=float(v)) for k, v in sorted(quotas.items())]))
        return _DQ(error_code=0, entries=entries)

    async def alter_client_quotas(self, conn: Connection, req: Request) -> Any:
        b = req.body
        results = []
        for e in b.entries:
            entity = {d.entity_type: d.entity_name for d in e.entity}
            err, msg = ErrorCode.NONE, None
            if not entity or any(t not in ENTITY_TYPES for t in entity) or len(entity) != len(e.entity):
                err, msg = ErrorCode.INVALID_REQUEST, "invalid quota entity"
            elif "ip" in entity and len(entity) > 1:
                err, msg = ErrorCode.INVALID_REQUEST, "ip quotas cannot be combined with user or client-id"
            else:
                allowed = IP_QUOTA_KEYS if "ip" in entity else QUOTA_KEYS
                for op in e.ops:
                    if op.key not in allowed:
                        err, msg = ErrorCode.INVALID_REQUEST, f"unknown quota key {op.key!r} for this entity"
                        break
                    if not op.remove and op.value <= 0:
                        err, msg = ErrorCode.INVALID_REQUEST, f"quota {op.key} must be positive"
                        break
            if err == ErrorCode.NONE and not b.validate_only:
                ctype, name = _quota_path(entity)
                cfg = dict(await self.zk_call(self.zk.get_entity_config, ctype, name))
                for op in e.ops:
                    if op.remove:
                        cfg.pop(op.key, None)
                    else:
                        v = op.value
                        cfg[op.key] = str(int(v)) if v == int(v) and op.key != "request_percentage" else repr(v)
                await self.zk_call(self.zk.set_or_create_entity_config, ctype, name, cfg)
            results.append(_AQ.EntryData(error_code=err, error_message=msg, entity=[
                _AQ.EntityData(entity_type=d.entity_type, entity_name=d.entity_name) for d in e.entity]))
        return _AQ(entries=results)

    # -- SCRAM credentials -------------------------------------------------------------------------------

    async def describe_user_scram_credentials(self, conn: Connection, req: Request) -> Any:
        b = req.body
        if b.users is None or not b.users:
            raw = await self.zk_call(self.zk.get_all_entities_with_config, "users")
            users = [desanitize(u) for u in raw if u != DEFAULT]
            explicit = False
        else:
            users = [u.name for u in b.users]
            explicit = True
            if len(set(users)) != len(users):
                dup = next(u for u in users if users.count(u) > 1)
                return _DS(error_code=0, results=[_DS.DescribeUserScramCredentialsResult(
                    user=u, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=f"Cannot describe user {dup} twice",
                    credential_infos=[]) for u in sorted(set(users))])
        results = []
        for user in users:
            cfg = await self.zk_call(self.zk.get_entity_config, "users", sanitize(user))
            infos = []
            for mech, (mname, _d) in SCRAM_MECHANISMS.items():
                stored = cfg.get(mname)
                if stored:
                    fields = dict(kv.split("=", 1) for kv in stored.split(",") if "=" in kv)
                    infos.append(_DS.CredentialInfo(mechanism=mech, iterations=int(fields.get("iterations", "0"))))
            if infos:
                results.append(_DS.DescribeUserScramCredentialsResult(user=user, error_code=0, credential_infos=infos))
            elif explicit:
                results.append(_DS.DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: {user}",
                    credential_infos=[]))
        return _DS(error_code=0, results=results)

    async def alter_user_scram_credentials(self, conn: Connection, req: Request) -> Any:
        b = req.body
        changes: dict[str, list[tuple[str, int, Any]]] = {}
        errors: dict[str, tuple[ErrorCode, str]] = {}
        seen: set[tuple[str, int]] = set()
        for d in b.deletions:
            changes.setdefault(d.name, []).append(("delete", d.mechanism, d))
        for u in b.upsertions:
            changes.setdefault(u.name, []).append(("upsert", u.mechanism, u))
        for user, ops in changes.items():
            for kind, mech, op in ops:
                if not user:
                    errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
                elif mech not in SCRAM_MECHANISMS:
                    errors[user] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mech}")
                elif (user, mech) in seen:
                    errors[user] = (ErrorCode.DUPLICATE_RESOURCE,
                                    f"A user credential cannot be altered twice in the same request: {user}")
                elif kind == "upsert" and not SCRAM_MIN_ITERATIONS <= op.iterations <= SCRAM_MAX_ITERATIONS:
                    errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                                    f"Iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}")
                seen.add((user, mech))
        results = []
        for user, ops in changes.items():
            if user in errors:
                refused_code, refused_msg = errors[user]
                results.append(_AS.AlterUserScramCredentialsResult(user=user, error_code=refused_code,
                                                                   error_message=refused_msg))
                continue
            cfg = dict(await self.zk_call(self.zk.get_entity_config, "users", sanitize(user)))
            code, msg = ErrorCode.NONE, None
            for kind, mech, op in ops:
                mname = SCRAM_MECHANISMS[mech][0]
                if kind == "delete":
                    if mname not in cfg:
                        code, msg = ErrorCode.RESOURCE_NOT_FOUND, \
                            f"Attempt to delete a user credential that does not exist: {user}"
                    cfg.pop(mname, None)
                else:
                    cfg[mname] = scram_credential(mech, op.salt, op.salted_password, op.iterations)
            if code == ErrorCode.NONE:
                await self.zk_call(self.zk.set_or_create_entity_config, "users", sanitize(user), cfg)
            results.append(_AS.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=msg))
        return _AS(results=results)


    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.SASL_HANDSHAKE, self.sasl_handshake)
        apis.register(ApiKey.SASL_AUTHENTICATE, self.sasl_authenticate)
        apis.register(ApiKey.DESCRIBE_CLIENT_QUOTAS, self.describe_client_quotas)
        apis.register(ApiKey.ALTER_CLIENT_QUOTAS, self.alter_client_quotas)
        apis.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, self.describe_user_scram_credentials)
        apis.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, self.alter_user_scram_credentials)
