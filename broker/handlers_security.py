"""Security-related APIs: out-of-place SASL requests, client quotas, SCRAM credentials and delegation tokens.

- SASL: authentication happens before a request reaches these handlers (broker/security/sasl_server.py
  answers SaslHandshake and SaslAuthenticate on SASL listeners until the client is authenticated).
  What arrives here is out of place: on a non-SASL listener, or after authentication without a
  re-authentication to begin. Kafka's KafkaApis answers ILLEGAL_SASL_STATE to both.
- ACLs: Describe/Create/DeleteAcls are served by broker/handlers_acls.py.
- Client quotas and SCRAM credentials are stored where Kafka stores them in ZooKeeper mode, as
  entity configs (``/config/users/<user>``, ``/config/users/<user>/clients/<client>``,
  ``/config/clients/<client>``, ``/config/ips/<ip>``, ``<default>`` for defaults; user names
  sanitized like Kafka's Sanitizer), with change notifications, and described back from there.
  Every broker follows those notifications: quotas are enforced from broker/quota/, SCRAM
  credentials are checked by broker/security/sasl_scram.py.
- Delegation tokens (KIP-48): Create/Renew/Expire/DescribeDelegationToken, with KafkaApis' rules.
  Only a connection that authenticated a principal, not with a token, may use them (SASL, or SSL
  with a client certificate; DELEGATION_TOKEN_REQUEST_NOT_ALLOWED otherwise). Creating a token for
  another owner needs CREATE_TOKENS on that User; renewers must be Users. Describe shows a caller its
  own tokens (as owner, requester or renewer) and the others its ACLs allow (DESCRIBE on the token
  or DESCRIBE_TOKENS on its owner). The tokens themselves are broker/delegation_tokens.py's.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import TYPE_CHECKING, Any

from broker.authorizer.api import AclOperation, ResourceType
from broker.security.delegation_token_cache import TokenInformation, same_principal
from broker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from broker.security.sasl_scram import token_authenticated
from protocol import scram
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

if TYPE_CHECKING:
    from collections.abc import Callable

    from broker.connection import Connection
    from broker.delegation_tokens import DelegationTokenManager
    from broker.kafka_apis import KafkaApis
    from broker.request_authorization import RequestAuthorizer
    from broker.wiring import ZkCall
    from controller.controller import KafkaController
    from controller.zk_client import KafkaZkClient
    from protocol.messages import Request

DEFAULT = "<default>"
QUOTA_KEYS = {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
IP_QUOTA_KEYS = {"connection_creation_rate"}
ENTITY_TYPES = ("user", "client-id", "ip")
# AlterUserScramCredentials names mechanisms by their wire type (Kafka's ScramMechanism; 0 is UNKNOWN).
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

_SH = response_type(ApiKey.SASL_HANDSHAKE)
_SA = response_type(ApiKey.SASL_AUTHENTICATE)
_DQ = response_type(ApiKey.DESCRIBE_CLIENT_QUOTAS)
_AQ = response_type(ApiKey.ALTER_CLIENT_QUOTAS)
_DS = response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
_AS = response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
_CT = response_type(ApiKey.CREATE_DELEGATION_TOKEN)
_RT = response_type(ApiKey.RENEW_DELEGATION_TOKEN)
_ET = response_type(ApiKey.EXPIRE_DELEGATION_TOKEN)
_DT = response_type(ApiKey.DESCRIBE_DELEGATION_TOKEN)
ERROR_TIMESTAMP = -1

log = logging.getLogger(__name__)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encode, with '*' and ' ' encoded too (so names are safe znode names)."""
    return urllib.parse.quote(name, safe="-_.")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def scram_credential(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> str:
    """The stored form of a SCRAM credential from what AlterUserScramCredentials carries (the client
    salted the password; the broker derives the keys), as Kafka's ScramCredentialUtils writes it."""
    name = SCRAM_MECHANISMS[mechanism]
    key_of_client = scram.client_key(name, salted_password)
    return scram.ScramCredential(salt, scram.stored_key(name, key_of_client), scram.server_key(name, salted_password),
                                 iterations).format()


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

    def __init__(self, zk: KafkaZkClient, zk_call: ZkCall, tokens: DelegationTokenManager | None = None,
                 auth: RequestAuthorizer | None = None) -> None:
        self.zk = zk
        self.zk_call = zk_call
        self.tokens = tokens
        self.auth = auth

    # -- SASL and ACLs ---------------------------------------------------------------------------------

    async def sasl_handshake(self, conn: Connection, req: Request) -> Any:
        return _SH(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    async def sasl_authenticate(self, conn: Connection, req: Request) -> Any:
        return _SA(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                   error_message="SaslAuthenticate request received after successful authentication")

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

    # -- SCRAM credentials (Kafka's ZkAdminManager.describe/alterUserScramCredentials) ------------------

    async def describe_user_scram_credentials(self, conn: Connection, req: Request) -> Any:
        b = req.body
        results: dict[str, Any] = {}

        def add(user: str, cfg: dict[str, str], explicit: bool) -> None:
            infos = []
            try:
                for mech, name in SCRAM_MECHANISMS.items():
                    stored = cfg.get(name)
                    if stored is not None:
                        infos.append(_DS.CredentialInfo(mechanism=mech,
                                                        iterations=scram.ScramCredential.parse(stored).iterations))
            except scram.ScramError as e:
                log.error("Error processing describe user SCRAM credential configs: %s", e)
                results[user] = _DS.DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(e), credential_infos=[])
                return
            if infos:
                results[user] = _DS.DescribeUserScramCredentialsResult(user=user, error_code=0, credential_infos=infos)
            elif explicit:
                results[user] = _DS.DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: {user}",
                    credential_infos=[])

        if not b.users:
            raw = await self.zk_call(self.zk.get_all_entities_with_config, "users")
            configs = await self.zk_call(self.zk.get_entity_configs, "users", raw)
            for name, cfg in configs.items():
                add(desanitize(name), cfg, explicit=False)
            return _DS(error_code=0, results=[results[u] for u in sorted(results)])
        users = [u.name for u in b.users]
        for user in users:
            if user in results:
                continue
            if not user:
                results[user] = _DS.DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message="Username must not be empty",
                    credential_infos=[])
            elif users.count(user) > 1:
                results[user] = _DS.DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                  f"{user}", credential_infos=[])
            else:
                add(user, await self.zk_call(self.zk.get_entity_config, "users", sanitize(user)), explicit=True)
        return _DS(error_code=0, results=[results[u] for u in dict.fromkeys(users)])

    async def alter_user_scram_credentials(self, conn: Connection, req: Request) -> Any:
        """Validated as Kafka validates them (empty user, unknown mechanism, iterations out of range,
        a user/mechanism pair twice, deleting what does not exist: the user's whole set of changes is
        refused), then written to ``/config/users/<user>`` with a change notification, so every broker's
        SCRAM credential cache picks the change up."""
        b = req.body
        results: list[Any] = []
        illegal: dict[str, str] = {}
        for d in b.deletions:
            if not d.name:
                illegal[d.name] = "Username must not be empty"
            elif d.mechanism not in SCRAM_MECHANISMS:
                illegal[d.name] = "Unknown SCRAM mechanism"
        for u in b.upsertions:
            if not u.name:
                illegal[u.name] = "Username must not be empty"
            elif u.mechanism not in SCRAM_MECHANISMS:
                illegal[u.name] = "Unknown SCRAM mechanism"
            elif u.iterations < scram.MIN_ITERATIONS:
                illegal[u.name] = "Too few iterations"
            elif u.iterations > scram.MAX_ITERATIONS:
                illegal[u.name] = "Too many iterations"
        for user, message in illegal.items():
            code = ErrorCode.UNSUPPORTED_SASL_MECHANISM if message == "Unknown SCRAM mechanism" \
                else ErrorCode.UNACCEPTABLE_CREDENTIAL
            results.append(_AS.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message))

        pairs = [(op.name, op.mechanism) for op in (*b.upsertions, *b.deletions) if op.name not in illegal]
        duplicated = {user for user, mech in pairs if pairs.count((user, mech)) > 1}
        for user in dict.fromkeys(u for u, _m in pairs if u in duplicated):
            results.append(_AS.AlterUserScramCredentialsResult(
                user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="A user credential cannot be altered twice in the same request"))
        users = list(dict.fromkeys(u for u, _m in pairs if u not in duplicated))
        configs = {u: dict(await self.zk_call(self.zk.get_entity_config, "users", sanitize(u))) for u in users}
        missing = list(dict.fromkeys(d.name for d in b.deletions
                                     if d.name in configs and SCRAM_MECHANISMS[d.mechanism] not in configs[d.name]))
        for user in missing:
            results.append(_AS.AlterUserScramCredentialsResult(
                user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message="Attempt to delete a user credential that does not exist"))
        for user in (u for u in users if u not in missing):
            cfg = configs[user]
            for d in b.deletions:
                if d.name == user:
                    cfg.pop(SCRAM_MECHANISMS[d.mechanism], None)
            for u in b.upsertions:
                if u.name == user:
                    cfg[SCRAM_MECHANISMS[u.mechanism]] = scram_credential(u.mechanism, u.salt, u.salted_password,
                                                                          u.iterations)
            try:
                await self.zk_call(self.zk.set_or_create_entity_config, "users", sanitize(user), cfg)
            except Exception as e:
                log.info("Error encountered while altering user SCRAM credentials: %s", e)
                results.append(_AS.AlterUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(e)))
                continue
            results.append(_AS.AlterUserScramCredentialsResult(user=user, error_code=ErrorCode.NONE, error_message=None))
        return _AS(results=results)

    # -- delegation tokens (Kafka's KafkaApis.handle*TokenRequest, ZooKeeper mode) ----------------------

    @staticmethod
    def allow_token_requests(conn: Connection) -> bool:
        """Kafka's KafkaApis.allowTokenRequests: not over PLAINTEXT, not one-way SSL (no client
        certificate), and not from a session a token authenticated."""
        protocol = conn.security_protocol
        return not (token_authenticated(conn.principal) or protocol == "PLAINTEXT"
                    or (protocol == "SSL" and same_principal(conn.principal, ANONYMOUS)))

    def _authorize(self, conn: Connection, req: Request, operation: AclOperation, resource_type: ResourceType,
                   name: str) -> bool:
        return self.auth is None or self.auth.authorize(conn, req, operation, resource_type, name)

    async def create_delegation_token(self, conn: Connection, req: Request) -> Any:
        b = req.body
        requester = conn.principal
        owner = requester if not b.owner_principal_name else KafkaPrincipal(b.owner_principal_type or "",
                                                                             b.owner_principal_name)
        renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in b.renewers]

        def refused(error: ErrorCode) -> Any:
            return _CT(error_code=error, principal_type=owner.principal_type, principal_name=owner.name,
                       token_requester_principal_type=requester.principal_type,
                       token_requester_principal_name=requester.name, issue_timestamp_ms=ERROR_TIMESTAMP,
                       expiry_timestamp_ms=ERROR_TIMESTAMP, max_timestamp_ms=ERROR_TIMESTAMP, token_id="", hmac=b"")

        if not self.allow_token_requests(conn):
            return refused(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if not same_principal(owner, requester) and not self._authorize(
                conn, req, AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)):
            return refused(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
        if any(r.principal_type != USER_TYPE for r in renewers):
            return refused(ErrorCode.INVALID_PRINCIPAL_TYPE)
        if self.tokens is None:
            return refused(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        created = await self.tokens.create(owner, requester, renewers, b.max_lifetime_ms)
        info = created.info
        if info is None:
            return refused(created.error)
        return _CT(error_code=ErrorCode.NONE, principal_type=info.owner.principal_type, principal_name=info.owner.name,
                   token_requester_principal_type=info.token_requester.principal_type,
                   token_requester_principal_name=info.token_requester.name,
                   issue_timestamp_ms=info.issue_timestamp, expiry_timestamp_ms=info.expiry_timestamp,
                   max_timestamp_ms=info.max_timestamp, token_id=info.token_id, hmac=created.hmac)

    async def renew_delegation_token(self, conn: Connection, req: Request) -> Any:
        if not self.allow_token_requests(conn):
            return _RT(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry_timestamp_ms=ERROR_TIMESTAMP)
        if self.tokens is None:
            return _RT(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, expiry_timestamp_ms=ERROR_TIMESTAMP)
        error, expiry = await self.tokens.renew(conn.principal, bytes(req.body.hmac), req.body.renew_period_ms)
        return _RT(error_code=error, expiry_timestamp_ms=expiry)

    async def expire_delegation_token(self, conn: Connection, req: Request) -> Any:
        if not self.allow_token_requests(conn):
            return _ET(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry_timestamp_ms=ERROR_TIMESTAMP)
        if self.tokens is None:
            return _ET(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, expiry_timestamp_ms=ERROR_TIMESTAMP)
        error, expiry = await self.tokens.expire(conn.principal, bytes(req.body.hmac), req.body.expiry_time_period_ms)
        return _ET(error_code=error, expiry_timestamp_ms=expiry)

    async def describe_delegation_token(self, conn: Connection, req: Request) -> Any:
        if not self.allow_token_requests(conn):
            return _DT(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
        if self.tokens is None or not self.tokens.enabled:
            return _DT(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
        raw_owners = req.body.owners
        if raw_owners is not None and not raw_owners:  # an empty list asks for nothing
            return _DT(error_code=ErrorCode.NONE, tokens=[])
        owners = None if raw_owners is None else [KafkaPrincipal(o.principal_type, o.principal_name)
                                                  for o in raw_owners]
        requester = conn.principal

        def eligible(token: TokenInformation) -> bool:
            """Kafka's DelegationTokenManager.filterToken."""
            if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
                return False
            if token.owner_or_renewer(requester):
                return True
            return (self._authorize(conn, req, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                    or self._authorize(conn, req, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(token.owner)))

        described = []
        for info, mac in self.tokens.tokens(eligible):
            described.append(_DT.DescribedDelegationToken(
                principal_type=info.owner.principal_type, principal_name=info.owner.name,
                token_requester_principal_type=info.token_requester.principal_type,
                token_requester_principal_name=info.token_requester.name, issue_timestamp=info.issue_timestamp,
                expiry_timestamp=info.expiry_timestamp, max_timestamp=info.max_timestamp, token_id=info.token_id,
                hmac=mac, renewers=[_DT.DescribedDelegationTokenRenewer(principal_type=r.principal_type,
                                                                        principal_name=r.name)
                                    for r in info.renewers]))
        return _DT(error_code=ErrorCode.NONE, tokens=described)

    def register(self, apis: KafkaApis) -> None:
        apis.register(ApiKey.SASL_HANDSHAKE, self.sasl_handshake)
        apis.register(ApiKey.SASL_AUTHENTICATE, self.sasl_authenticate)
        apis.register(ApiKey.DESCRIBE_CLIENT_QUOTAS, self.describe_client_quotas)
        apis.register(ApiKey.ALTER_CLIENT_QUOTAS, self.alter_client_quotas)
        apis.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, self.describe_user_scram_credentials)
        apis.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, self.alter_user_scram_credentials)
        apis.register(ApiKey.CREATE_DELEGATION_TOKEN, self.create_delegation_token)
        apis.register(ApiKey.RENEW_DELEGATION_TOKEN, self.renew_delegation_token)
        apis.register(ApiKey.EXPIRE_DELEGATION_TOKEN, self.expire_delegation_token)
        apis.register(ApiKey.DESCRIBE_DELEGATION_TOKEN, self.describe_delegation_token)


def scram_alterations_only_on_the_controller(apis: KafkaApis, controller: Callable[[], KafkaController | None]
                                             ) -> None:
    """Kafka 3.9 in ZooKeeper mode answers AlterUserScramCredentials off the active controller with
    NOT_CONTROLLER for every user it names, before any authorization (KafkaApis checks
    ``controller.isActive`` first). Installed over the authorization guard, so it runs first."""
    inner = apis.handlers.get(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    if inner is None:
        return

    async def handler(conn: Connection, req: Request) -> Any:
        ctrl = controller()
        if ctrl is None or not ctrl.is_active:
            b = req.body
            users = sorted({d.name for d in b.deletions} | {u.name for u in b.upsertions})
            # The error's own message is Kafka's generic one, which its ApiError leaves out.
            return _AS(results=[_AS.AlterUserScramCredentialsResult(user=u, error_code=ErrorCode.NOT_CONTROLLER,
                                                                    error_message=None) for u in users])
        return await inner(conn, req)

    apis.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, handler)
