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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from clients.certificates import CertificateAuthority
from clients.client_config import client_security
from clients.devcluster import REPO, LocalCluster, describe_brokers, run_in_foreground
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


def ensure_broker_certificate(files: SecureFiles, ca: CertificateAuthority, key_password: str) -> None:
    """The brokers' certificate (one for all: they all listen on this host), re-issued only when
    missing, expiring, or not signed by ``ca``."""
    if files.broker_cert.exists() and files.broker_keystore.exists():
        cert = x509.load_pem_x509_certificate(files.broker_cert.read_bytes())
        if _issued_by(cert, ca) and cert.not_valid_after_utc > _now() + datetime.timedelta(days=1):
            return
    issued = ca.issue_server("CN=kafkette-broker,O=kafkette")
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


class SecureDevCluster:
    """A ``LocalCluster`` whose listeners are SASL_SSL, with the files clients need to reach it."""

    def __init__(self, n: int = 3, *, base_port: int = 9092, state_dir: str | os.PathLike[str],
                 zk_port: int | None = None, metrics_base_port: int | None = None,
                 inter_broker_base_port: int = 0, host: str = "localhost") -> None:
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
            overrides=self.common_broker_properties(), metrics_base_port=metrics_base_port,
            broker_overrides=self.listener_properties, security=self.client_security,
            before_brokers=self._create_scram_users)
        self.write_client_files()

    # -- broker side ------------------------------------------------------------------------------

    def common_broker_properties(self) -> dict[str, str]:
        f, pw = self.files, self.passwords
        return {
            "listener.security.protocol.map": f"{CLIENT_LISTENER}:SASL_SSL,{BROKER_LISTENER}:SASL_SSL",
            "inter.broker.listener.name": BROKER_LISTENER,
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            # Server side: SCRAM users come from ZooKeeper; the BROKER entry also holds the broker's own
            # credentials for its connections to other brokers.
            f"listener.name.{CLIENT_LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": scram_jaas_config(),
            f"listener.name.{BROKER_LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
                scram_jaas_config(BROKER_USER, pw["broker.password"]),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(f.broker_keystore),
            "ssl.key.password": pw["ssl.key.password"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(f.ca_pem),
            "authorizer.class.name": ACL_AUTHORIZER,
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }

    def listener_properties(self, broker_id: int, client_port: int) -> dict[str, str]:
        ib = self.inter_broker_base_port + broker_id if self.inter_broker_base_port else free_port()
        listeners = f"{CLIENT_LISTENER}://127.0.0.1:{client_port},{BROKER_LISTENER}://127.0.0.1:{ib}"
        return {"listeners": listeners, "advertised.listeners": listeners}

    def _create_scram_users(self, zk_connect: str) -> None:
        self.scram_users_written = write_scram_credentials(zk_connect, {
            ADMIN_USER: self.passwords["admin.password"], BROKER_USER: self.passwords["broker.password"]})

    # -- client side ------------------------------------------------------------------------------

    def client_properties(self) -> dict[str, str]:
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": scram_jaas_config(ADMIN_USER, self.passwords["admin.password"]),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.files.ca_pem),
        }

    def kcat_properties(self) -> dict[str, str]:
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.passwords["admin.password"],
            "ssl.ca.location": str(self.files.ca_pem),
        }

    def write_client_files(self) -> None:
        _write_properties(self.files.client_properties, self.client_properties(),
                          "Kafka client configs for the secured dev cluster, as user admin (a super user):\n"
                          "kafkette --command-config, Kafka's tools, Java clients, Spark's kafka.* options.")
        _write_properties(self.files.kcat_config, self.kcat_properties(),
                          "librdkafka configs for the secured dev cluster, as user admin: kcat -F <this file>.")

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
    args = ap.parse_args(argv)
    secure = SecureDevCluster(args.brokers, base_port=args.port, state_dir=args.dir, zk_port=args.zk_port,
                              metrics_base_port=None if args.metrics_port < 0 else args.metrics_port,
                              inter_broker_base_port=args.inter_broker_port)

    def describe(cluster: LocalCluster) -> None:
        describe_brokers(cluster)
        if secure.scram_users_written:
            print(f"SCRAM credentials written to ZooKeeper for: {', '.join(secure.scram_users_written)}")
        print(secure.usage())
        print(f"bootstrap servers: {secure.bootstrap}   -- Ctrl-C stops the cluster")

    return run_in_foreground(secure.cluster, describe)


if __name__ == "__main__":
    sys.exit(main())
