"""``kafkette scram``: SCRAM credentials of users, as ``kafka-configs.sh --entity-type users`` manages them.

    kafkette scram --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    kafkette scram --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256
    kafkette scram --describe [--entity-type users] [--entity-name alice ...]

Through AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554), like kafka-configs with
``--bootstrap-server``: the password never leaves this process. The client salts it (Kafka's admin
client draws a random 130-bit base-36 string as salt) and sends only the salted password, from which
the broker derives the stored and server keys.
"""

from __future__ import annotations

import argparse
import re
import secrets
from typing import Any

from clients.admin import WireClient
from clients.cmd_common import (
    UsageError,
    add_connection_args,
    add_output_arg,
    connect,
    emit,
    split_config_list,
)
from clients.connection import check
from protocol import scram
from protocol.api_versions import ApiKey
from protocol.messages import request_type

__all__ = ["DEFAULT_ITERATIONS", "MECHANISM_IDS", "register"]

# Wire ids of the mechanisms (Kafka's ScramMechanism.type()).
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
DEFAULT_ITERATIONS = 4096  # kafka-configs' DefaultScramIterations
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def register(sub: Any) -> None:
    p = sub.add_parser("scram", help="add, delete and describe users' SCRAM credentials",
                       description="Manage SCRAM-SHA-256/512 credentials of users (kafka-configs.sh "
                                   "--entity-type users with SCRAM configs, through the admin API).")
    acts = p.add_mutually_exclusive_group(required=True)
    acts.add_argument("--describe", dest="action", action="store_const", const="describe",
                      help="show which mechanisms (and iterations) users have credentials for")
    acts.add_argument("--alter", dest="action", action="store_const", const="alter", help="add or delete credentials")
    add_connection_args(p)
    add_output_arg(p)
    p.add_argument("--entity-type", choices=["users"], default="users", help="users (the only entity with credentials)")
    p.add_argument("--entity-name", action="append", metavar="USER", help="the user (repeatable for --describe)")
    p.add_argument("--user", action="append", metavar="USER", help="shortcut for --entity-type users --entity-name USER")
    p.add_argument("--add-config", action="append", metavar="MECH=[iterations=N,password=P]",
                   help="credentials to add or replace: SCRAM-SHA-256=[iterations=8192,password=secret] "
                        f"(iterations default to {DEFAULT_ITERATIONS})")
    p.add_argument("--delete-config", action="append", metavar="MECH[,MECH]", help="mechanisms whose credential goes")
    p.set_defaults(func=run)


def parse_credential(mechanism: str, text: str) -> tuple[int, str]:
    """``iterations=8192,password=secret`` -> (8192, "secret"), with kafka-configs' checks."""
    m = _CREDENTIAL.fullmatch(text)
    if m is None:
        raise UsageError(f"Invalid credential property {mechanism}={text}")
    iterations = int(m.group(1)) if m.group(1) not in (None, "", "-1") else DEFAULT_ITERATIONS
    if iterations < scram.MIN_ITERATIONS:
        raise UsageError(f"Iterations {iterations} is less than the minimum {scram.MIN_ITERATIONS} required "
                         f"for {mechanism}")
    return iterations, m.group(2)


def _additions(items: list[str] | None) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for item in items or []:
        for part in split_config_list(item):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep:
                raise UsageError(f"invalid config {part!r}: expected MECHANISM=[iterations=N,password=P]")
            if name not in MECHANISM_IDS:
                raise UsageError(f"Only SCRAM credential configs can be added here (SCRAM-SHA-256, SCRAM-SHA-512). "
                                 f"Unexpected config names: {name}")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[name] = parse_credential(name, value)
    return out


def _deletions(items: list[str] | None) -> list[str]:
    out = [k for item in items or [] for k in split_config_list(item)]
    unknown = [k for k in out if k not in MECHANISM_IDS]
    if unknown:
        raise UsageError("Only SCRAM credential configs can be deleted here (SCRAM-SHA-256, SCRAM-SHA-512). "
                         f"Unexpected config names: {', '.join(unknown)}")
    return out


def kafka_salt() -> bytes:
    """A salt as Kafka's admin client makes one: a random 130-bit number in base 36, as UTF-8."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        n, r = divmod(n, 36)
        text = digits[r] + text
        if n == 0:
            return text.encode()


def run(args: argparse.Namespace) -> int:
    users = (args.entity_name or []) + (args.user or [])
    if args.action == "alter":
        if len(users) != 1:
            raise UsageError("--alter needs exactly one --entity-name (or --user)")
        add = _additions(args.add_config)
        delete = _deletions(args.delete_config)
        if not add and not delete:
            raise UsageError("--alter needs --add-config or --delete-config")
        both = sorted(set(add) & set(delete))
        if both:
            raise UsageError(f"config(s) {', '.join(both)} both added and deleted")
        with connect(args) as client:
            alter(client, users[0], add, delete)
        if args.output == "json":
            emit(args, {"user": users[0], "added": sorted(add), "deleted": delete})
        else:
            print(f"Completed updating config for user {users[0]}.")
        return 0
    if args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    with connect(args) as client:
        return describe(client, args, users)


def alter(client: WireClient, user: str, add: dict[str, tuple[int, str]], delete: list[str]) -> None:
    t = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    upsertions = []
    for mechanism, (iterations, password) in add.items():
        salt = kafka_salt()
        upsertions.append(t.ScramCredentialUpsertion(
            name=user, mechanism=MECHANISM_IDS[mechanism], iterations=iterations, salt=salt,
            salted_password=scram.salted_password(mechanism, password, salt, iterations)))
    deletions = [t.ScramCredentialDeletion(name=user, mechanism=MECHANISM_IDS[m]) for m in delete]
    # Kafka's admin client sends credential changes to the controller.
    r = client.call_controller(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletions=deletions, upsertions=upsertions)
    for res in r.results:
        check(res.error_code, res.error_message, f"AlterUserScramCredentials for user '{res.user}'")


def describe(client: WireClient, args: argparse.Namespace, users: list[str]) -> int:
    t = request_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    r = client.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                    users=[t.UserName(name=u) for u in users] if users else None)
    check(r.error_code, r.error_message, "DescribeUserScramCredentials")
    out = []
    for res in r.results:
        infos = [{"mechanism": MECHANISM_NAMES.get(i.mechanism, str(i.mechanism)), "iterations": i.iterations}
                 for i in res.credential_infos or []]
        out.append({"user": res.user, "error_code": res.error_code, "error_message": res.error_message,
                    "credentials": infos})
    if args.output == "json":
        emit(args, out)
        return 0
    from protocol.errors import error_info

    for item in out:
        if item["error_code"]:
            print(f"Error retrieving SCRAM credential configs for user-principal '{item['user']}': "
                  f"{error_info(item['error_code']).name}: {item['error_message']}")
            continue
        text = ", ".join(f"{c['mechanism']}=iterations={c['iterations']}" for c in item["credentials"])
        print(f"SCRAM credential configs for user-principal '{item['user']}' are {text}")
    return 0
