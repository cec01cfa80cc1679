"""The dev cluster with security on (``make run-secure``): the same ZooKeeper and brokers as ``make run``,
with every listener SASL_SSL (SCRAM-SHA-512) and Kafka's ACL authorizer.

- Clients connect to listener ``CLIENT`` (SASL_SSL) on ``--port``.. (9092-9094); brokers talk to each
  other over listener ``BROKER`` (SASL_SSL too), authenticating as ``kafkette-broker``.
- ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` with ``super.users`` User:admin and
  User:kafkette-broker; every other principal needs ACLs (``kafkette acls``).
- A CA made here signs the brokers' certificate. CA, certificate and passwords are kept in the state
  directory (``--dir``, default ``.cache/devcluster-secure``), so a second run reuses them and the
  client files written by the first stay valid.
- SCRAM credentials of admin and kafkette-broker are written to ZooKeeper (``/config/users/<user>``)
  before any broker starts, as ``kafka-configs --zookeeper ... --alter --add-config
  'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name admin`` bootstraps them in Kafka.
- Written for clients: ``client.properties`` (Kafka's client configs: the kafkette CLI's
  ``--command-config``, the Java tools, Spark's ``kafka.*`` options), ``kcat.conf`` (librdkafka's names,
  for ``kcat -F``) and ``ca.pem``.

    python -m clients.devcluster_secure --brokers 3 --port 9092
"""

from __future__ import annotations

import argparse
import datetime
import hmac
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from clients.certificates import CertificateAuthority
from clients.client_config import client_security
from clients.devcluster import REPO, LocalCluster, control_command_for, describe_brokers, run_in_foreground
from clients.devcluster_overrides import ENV_VAR, OverrideError, parse_overrides, split_env
from clients.zookeeper_server import free_port
from config.properties import read_properties
from protocol import scram

__all__ = ["ADMIN_USER", "BROKER_USER", "MECHANISM", "SecureDevCluster", "SecureFiles", "main",
           "write_scram_credentials"]

MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
BROKER_USER = "kafkette-broker"
CLIENT_LISTENER = "CLIENT"
BROKER_LISTENER = "BROKER"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# What kafka-configs uses when only a password is given: the mechanism's minimum iteration count.
SCRAM_ITERATIONS = scram.MIN_ITERATIONS
_PASSWORDS = ("admin.password", "broker.password", "ssl.key.password")


def scram_jaas_config(username: str | None = None, password: str | None = None) -> str:
    """A ``sasl.jaas.config`` value for the SCRAM login module (no credentials: a server listener)."""
    if username is None:
        return f"{SCRAM_LOGIN_MODULE} required;"
    return f'{SCRAM_LOGIN_MODULE} required username="{username}" password="{password}";'


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _write_properties(path: Path, props: Mapping[str, str], header: str) -> None:
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    _write_private(path, "\n".join([*lines, *(f"{k}={v}" for k, v in props.items())]) + "\n")


@dataclass(frozen=True)
class SecureFiles:
    """Everything the secured dev cluster keeps in its state directory."""

    state_dir: Path

    @property
    def ssl_dir(self) -> Path:
        return self.state_dir / "ssl"

    @property
    def ca_pem(self) -> Path:
        return self.ssl_dir / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.ssl_dir / "ca.key"

    @property
    def broker_cert(self) -> Path:
        return self.ssl_dir / "broker.crt"

    @property
    def broker_keystore(self) -> Path:
        return self.ssl_dir / "broker-keystore.pem"  # encrypted key + chain: ssl.keystore.type=PEM

    @property
    def secrets(self) -> Path:
        return self.state_dir / "secrets.properties"

    @property
    def client_properties(self) -> Path:
        return self.state_dir / "client.properties"

    @property
    def kcat_config(self) -> Path:
        return self.state_dir / "kcat.conf"

    @property
    def cluster_dir(self) -> Path:
        return self.state_dir / "cluster"


def ensure_passwords(files: SecureFiles) -> dict[str, str]:
    """The cluster's passwords: read from the state directory, generated once when missing."""
    current = dict(read_properties(files.secrets)) if files.secrets.exists() else {}
    if all(current.get(k) for k in _PASSWORDS):
        return current
    for k in _PASSWORDS:
        current[k] = current.get(k) or secrets.token_urlsafe(18)
    files.state_dir.mkdir(parents=True, exist_ok=True)
    _write_properties(files.secrets, current, "Passwords of the secured dev cluster (kept between runs).")
    return current


def ensure_ca(files: SecureFiles) -> CertificateAuthority:
    """The CA of an earlier run when its files are there, else a new one (written with its key)."""
    if files.ca_pem.exists() and files.ca_key.exists():
        cert = x509.load_pem_x509_certificate(files.ca_pem.read_bytes())
        key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise RuntimeError(f"{files.ca_key}: not an EC or RSA key")
        if cert.not_valid_after_utc > _now() + datetime.timedelta(days=1):
            return CertificateAuthority(key, cert, "ec" if isinstance(key, ec.EllipticCurvePrivateKey) else "rsa")
    ca = CertificateAuthority.create("CN=kafkette dev cluster CA,O=kafkette")
    files.ssl_dir.mkdir(parents=True, exist_ok=True)
    ca.write_pem(files.ca_pem)
    _write_private(files.ca_key, ca.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()).decode("ascii"))
    return ca


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _issued_by(cert: x509.Certificate, ca: CertificateAuthority) -> bool:
    try:
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, Exception):  # InvalidSignature is not a ValueError
        return False
    return True


def _dns_names(cert: x509.Certificate) -> set[str]:
    try:
        return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                   .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        return set()


def ensure_broker_certificate(files: SecureFiles, ca: CertificateAuthority, key_password: str,
                              hosts: Sequence[str] = ()) -> None:
    """The brokers' certificate (one for all; valid for localhost, 127.0.0.1 and ``hosts``), re-issued
    only when missing, expiring, not signed by ``ca`` or missing one of ``hosts``."""
    if files.broker_cert.exists() and files.broker_keystore.exists():
        cert = x509.load_pem_x509_certificate(files.broker_cert.read_bytes())
        if (_issued_by(cert, ca) and cert.not_valid_after_utc > _now() + datetime.timedelta(days=1)
                and set(hosts) <= _dns_names(cert)):
            return
    issued = ca.issue_server("CN=kafkette-broker,O=kafkette", extra_dns=hosts)
    pem = issued.write_pem(files.ssl_dir, "broker", key_password=key_password)
    assert pem.keystore == files.broker_keystore and pem.cert == files.broker_cert


def write_scram_credentials(zk_connect: str, users: Mapping[str, str], mechanism: str = MECHANISM,
                            iterations: int = SCRAM_ITERATIONS) -> list[str]:
    """Write SCRAM credentials to ``/config/users/<user>`` (with a change notification), as
    ``kafka-configs --zookeeper`` does. A user whose stored credential already matches the password is
    left alone. Returns the users written."""
    from broker.handlers_security import sanitize
    from controller.zk_client import KafkaZkClient

    written = []
    zk = KafkaZkClient(zk_connect, name="devcluster-secure").start(timeout=30.0)
    try:
        for user, password in users.items():
            config = dict(zk.get_entity_config("users", sanitize(user)))
            if mechanism in config and _credential_matches(config[mechanism], mechanism, password):
                continue
            config[mechanism] = scram.credential_from_password(mechanism, password, iterations).format()
            zk.set_or_create_entity_config("users", sanitize(user), config)
            written.append(user)
    finally:
        zk.close()
    return written


def _credential_matches(stored: str, mechanism: str, password: str) -> bool:
    try:
        old = scram.ScramCredential.parse(stored)
    except scram.ScramError:
        return False
    new = scram.credential_from_password(mechanism, password, old.iterations, old.salt)
    return hmac.compare_digest(old.stored_key, new.stored_key) and hmac.compare_digest(old.server_key, new.server_key)


def secure_broker_properties(files: SecureFiles, passwords: Mapping[str, str], client_listener: str,
                             broker_listener: str) -> dict[str, str]:
    """Everything but the listeners' addresses: both listeners SASL_SSL with SCRAM-SHA-512, TLS from
    the state directory's files, the ACL authorizer with the admin and broker users as super users."""
    return {
        "listener.security.protocol.map": f"{client_listener}:SASL_SSL,{broker_listener}:SASL_SSL",
        "inter.broker.listener.name": broker_listener,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        # Server side: SCRAM users come from ZooKeeper; the broker listener's entry also holds the
        # broker's own credentials for its connections to other brokers.
        f"listener.name.{client_listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config": scram_jaas_config(),
        f"listener.name.{broker_listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
            scram_jaas_config(BROKER_USER, passwords["broker.password"]),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.broker_keystore),
        "ssl.key.password": passwords["ssl.key.password"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_pem),
        "authorizer.class.name": ACL_AUTHORIZER,
        "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
    }


def admin_client_properties(passwords: Mapping[str, str], ca_pem: str | Path) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.jaas.config": scram_jaas_config(ADMIN_USER, passwords["admin.password"]),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_pem),
    }


def admin_kcat_properties(passwords: Mapping[str, str], ca_pem: str | Path) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": passwords["admin.password"],
        "ssl.ca.location": str(ca_pem),
    }


CLIENT_PROPERTIES_HEADER = ("Kafka client configs for the secured cluster, as user admin (a super user):\n"
                            "kafkette --command-config, Kafka's tools, Java clients, Spark's kafka.* options.")
KCAT_HEADER = "librdkafka configs for the secured cluster, as user admin: kcat -F <this file>."


class SecureDevCluster:
    """A ``LocalCluster`` whose listeners are SASL_SSL, with the files clients need to reach it."""

    def __init__(self, n: int = 3, *, base_port: int = 9092, state_dir: str | os.PathLike[str],
                 zk_port: int | None = None, metrics_base_port: int | None = None,
                 inter_broker_base_port: int = 0, host: str = "localhost",
                 overrides: Mapping[str, str] | None = None) -> None:
        self.files = SecureFiles(Path(state_dir).resolve())
        self.host = host  # how clients name the brokers: the certificate holds localhost and 127.0.0.1
        self.passwords = ensure_passwords(self.files)
        self.ca = ensure_ca(self.files)
        ensure_broker_certificate(self.files, self.ca, self.passwords["ssl.key.password"])
        self.inter_broker_base_port = inter_broker_base_port
        self.client_security = client_security(self.client_properties())  # what the CLI makes of the file
        self.scram_users_written: list[str] = []
        self.cluster = LocalCluster(
            n, base_port=base_port, base_dir=self.files.cluster_dir, zk_port=zk_port,
            overrides={**self.common_broker_properties(), **(overrides or {})}, metrics_base_port=metrics_base_port,
            broker_overrides=self.listener_properties, security=self.client_security,
            before_brokers=self._create_scram_users)
        self.write_client_files()

    # -- broker side ------------------------------------------------------------------------------

    def common_broker_properties(self) -> dict[str, str]:
        return secure_broker_properties(self.files, self.passwords, CLIENT_LISTENER, BROKER_LISTENER)

    def listener_properties(self, broker_id: int, client_port: int) -> dict[str, str]:
        ib = self.inter_broker_base_port + broker_id if self.inter_broker_base_port else free_port()
        listeners = f"{CLIENT_LISTENER}://127.0.0.1:{client_port},{BROKER_LISTENER}://127.0.0.1:{ib}"
        return {"listeners": listeners, "advertised.listeners": listeners}

    def _create_scram_users(self, zk_connect: str) -> None:
        self.scram_users_written = write_scram_credentials(zk_connect, {
            ADMIN_USER: self.passwords["admin.password"], BROKER_USER: self.passwords["broker.password"]})

    # -- client side ------------------------------------------------------------------------------

    def client_properties(self) -> dict[str, str]:
        return admin_client_properties(self.passwords, self.files.ca_pem)

    def write_client_files(self) -> None:
        _write_properties(self.files.client_properties, self.client_properties(), CLIENT_PROPERTIES_HEADER)
        _write_properties(self.files.kcat_config, admin_kcat_properties(self.passwords, self.files.ca_pem),
                          KCAT_HEADER)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{b.port}" for b in self.cluster.brokers)

    def start(self) -> SecureDevCluster:
        self.cluster.start()
        return self

    def stop(self) -> None:
        self.cluster.stop()

    def __enter__(self) -> SecureDevCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def usage(self) -> str:
        """What ``make run-secure`` prints once the cluster is up: the files and examples to copy."""
        f = self.files
        first = self.bootstrap.split(",")[0]
        pw = self.passwords["admin.password"]
        return f"""\
security: SASL_SSL (SCRAM-SHA-512) on every listener, ACL authorizer; super users: {ADMIN_USER}, {BROKER_USER}
CA certificate:           {f.ca_pem}
client properties:        {f.client_properties}   (user {ADMIN_USER})
kcat (librdkafka) config: {f.kcat_config}

kafkette CLI:
    kafkette topics --command-config {f.client_properties} --bootstrap-server {first} --list
kcat:
    kcat -F {f.kcat_config} -b {first} -L
kafka-python:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers="{first}", security_protocol="SASL_SSL",
                             sasl_mechanism="{MECHANISM}", sasl_plain_username="{ADMIN_USER}",
                             sasl_plain_password="{pw}", ssl_cafile="{f.ca_pem}")
    print(admin.list_topics())
    admin.close()
other users:  kafkette scram --command-config {f.client_properties} --bootstrap-server {first} \\
                  --alter --entity-type users --entity-name alice --add-config 'SCRAM-SHA-512=[password=alice-secret]'
              kafkette acls --command-config {f.client_properties} --bootstrap-server {first} \\
                  --add --allow-principal User:alice --operation Read --topic orders
"""


def init_only(state_dir: Path, zk_connect: str, broker_hosts: Sequence[str], *, client_listener: str,
              broker_listener: str, owner: str | None = None, host_dir: Path | None = None,
              host_path: str | None = None) -> None:
    """What the secured compose profile's one-shot init service does (deploy/compose.secure.yml):
    the CA, the brokers' certificate (valid for ``broker_hosts``), passwords and SCRAM users as for the
    dev cluster, plus ``broker.properties`` with the security settings for the brokers to include, and
    ``client.properties`` for containers. ``host_dir`` (a bind mount, seen by the host as
    ``host_path``) gets ca.pem, client.properties and kcat.conf for clients on the host, owned by the
    directory's owner. ``owner`` ("uid:gid") is given the state directory (the brokers' user)."""
    files = SecureFiles(state_dir)
    passwords = ensure_passwords(files)
    ca = ensure_ca(files)
    ensure_broker_certificate(files, ca, passwords["ssl.key.password"], broker_hosts)
    _write_properties(state_dir / "broker.properties",
                      secure_broker_properties(files, passwords, client_listener, broker_listener),
                      "Security settings of every broker (written by the init service).")
    _write_properties(files.client_properties, admin_client_properties(passwords, files.ca_pem),
                      CLIENT_PROPERTIES_HEADER)
    _write_properties(files.kcat_config, admin_kcat_properties(passwords, files.ca_pem), KCAT_HEADER)
    written = write_scram_credentials(zk_connect, {ADMIN_USER: passwords["admin.password"],
                                                   BROKER_USER: passwords["broker.password"]})
    print(f"SCRAM credentials written to {zk_connect} for: {', '.join(written) or 'nobody (already there)'}")
    if owner:
        uid, _, gid = owner.partition(":")
        for path in [state_dir, *state_dir.rglob("*")]:
            os.chown(path, int(uid), int(gid or uid))
    if host_dir is not None:
        seen_as = Path(host_path or host_dir)
        host_dir.mkdir(parents=True, exist_ok=True)
        (host_dir / "ca.pem").write_bytes(files.ca_pem.read_bytes())
        _write_properties(host_dir / "client.properties", admin_client_properties(passwords, seen_as / "ca.pem"),
                          CLIENT_PROPERTIES_HEADER)
        _write_properties(host_dir / "kcat.conf", admin_kcat_properties(passwords, seen_as / "ca.pem"), KCAT_HEADER)
        st = host_dir.stat()
        for name in ("ca.pem", "client.properties", "kcat.conf"):
            os.chown(host_dir / name, st.st_uid, st.st_gid)
        print(f"client files for the host: {seen_as}/client.properties, {seen_as}/kcat.conf, {seen_as}/ca.pem")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a local kafkette cluster with SASL_SSL listeners, SCRAM users "
                                             "and an ACL authorizer.")
    ap.add_argument("--brokers", type=int, default=int(os.environ.get("KAFKETTE_BROKERS", "3")))
    ap.add_argument("--port", type=int, default=9092, help="client port of broker 0; broker i listens on port+i")
    ap.add_argument("--inter-broker-port", type=int, default=0,
                    help="inter-broker port of broker 0; broker i uses port+i (0: free ports)")
    ap.add_argument("--zk-port", type=int, default=2181)
    ap.add_argument("--metrics-port", type=int, default=9404,
                    help="Prometheus port of broker 0; broker i serves metrics on port+i (-1: off)")
    ap.add_argument("--dir", default=str(REPO / ".cache" / "devcluster-secure"),
                    help="state directory: CA, certificates, passwords, client files, data (kept)")
    ap.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                    help=f"a broker config for every broker (repeatable; also ${ENV_VAR}=\"NAME=VALUE ...\")")
    init = ap.add_argument_group("--init-only: prepare files and SCRAM users for brokers started elsewhere "
                                 "(the compose profile's init service), start nothing")
    init.add_argument("--init-only", action="store_true")
    init.add_argument("--zookeeper-connect", help="zookeeper.connect of those brokers, chroot included")
    init.add_argument("--broker-host", action="append", default=[], help="a host name the brokers are reached by")
    init.add_argument("--client-listener", default="EXTERNAL")
    init.add_argument("--broker-listener", default="INTERNAL")
    init.add_argument("--owner", help="uid:gid to give the state directory (the brokers' user)")
    init.add_argument("--host-dir", help="also write the host's client files here")
    init.add_argument("--host-path", help="the path the host knows --host-dir by")
    args = ap.parse_args(argv)
    if args.init_only:
        if not args.zookeeper_connect:
            ap.error("--init-only needs --zookeeper-connect")
        init_only(Path(args.dir), args.zookeeper_connect, args.broker_host, client_listener=args.client_listener,
                  broker_listener=args.broker_listener, owner=args.owner,
                  host_dir=Path(args.host_dir) if args.host_dir else None, host_path=args.host_path)
        return 0
    try:
        overrides = parse_overrides([*split_env(os.environ.get(ENV_VAR)), *args.override])
    except (OverrideError, ValueError) as e:
        print(f"devcluster: {e}", file=sys.stderr)
        return 2
    secure = SecureDevCluster(args.brokers, base_port=args.port, state_dir=args.dir, zk_port=args.zk_port,
                              metrics_base_port=None if args.metrics_port < 0 else args.metrics_port,
                              inter_broker_base_port=args.inter_broker_port, overrides=overrides)

    def describe(cluster: LocalCluster) -> None:
        describe_brokers(cluster)
        if secure.scram_users_written:
            print(f"SCRAM credentials written to ZooKeeper for: {', '.join(secure.scram_users_written)}")
        print(secure.usage())
        print(f"bootstrap servers: {secure.bootstrap}   -- Ctrl-C stops the cluster")

    default_dir = Path(args.dir).resolve() == (REPO / ".cache" / "devcluster-secure").resolve()
    inter_broker = ([(args.inter_broker_port + i, f"inter-broker listener of broker {i}") for i in range(args.brokers)]
                    if args.inter_broker_port else [])
    return run_in_foreground(
        secure.cluster, describe, extra_ports=inter_broker,
        control_command=control_command_for("--secure" if default_dir else f"--dir {secure.cluster.base_dir}"),
        shape_hint="give this one another state directory (--dir)")


if __name__ == "__main__":
    sys.exit(main())
