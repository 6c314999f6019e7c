"""``slipstream users``: SCRAM users (like kafka-configs.sh --alter --add-config SCRAM-...).

Against a running broker (``--bootstrap-server``, with ``--command-config`` for a
secured listener) through AlterUserScramCredentials/DescribeUserScramCredentials, or
offline in a stopped broker's data dir (``--data-dir``), e.g. to create the first
admin user before the broker ever starts. Passwords are salted before they are sent
or stored; only salted keys are kept.
"""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import TYPE_CHECKING

from ..client.cluster import Cluster
from ..client.scram_admin import alter_scram_user, describe_scram_users
from ..protocol.scram import DEFAULT_ITERATIONS, MECHANISMS
from .client_commands import _bootstrap_arg, _run

if TYPE_CHECKING:
    from .client_commands import Sub


def add_commands(sub: Sub) -> None:
    users = sub.add_parser(
        "users",
        help="add, list and delete SCRAM users (SASL PLAIN/SCRAM credentials)",
        description="SCRAM users of a broker: online via --bootstrap-server, or offline in a stopped "
        "broker's --data-dir.",
    )
    usub = users.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    p = usub.add_parser("add", help="create a user or change its password")
    p.add_argument("name")
    p.add_argument("--password", help="the password (asked for when not given)")
    _mechanism_args(p)
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 iterations (4096..16384)")
    _target_args(p, _add)
    p = usub.add_parser("list", help="users and their SCRAM mechanisms")
    _target_args(p, _list)
    p = usub.add_parser("delete", help="remove a user's credentials")
    p.add_argument("name")
    _mechanism_args(p)
    _target_args(p, _delete)


def _mechanism_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mechanism", action="append", default=[], choices=sorted(MECHANISMS),
        help="SCRAM mechanism; repeatable (default: both SCRAM-SHA-256 and SCRAM-SHA-512)",
    )


def _target_args(p: argparse.ArgumentParser, online: object) -> None:
    p.add_argument("--data-dir", help="edit this stopped broker's data dir instead of asking a broker")
    _bootstrap_arg(p)
    p.set_defaults(func=lambda args: _offline(args) if args.data_dir else _run(online)(args))  # type: ignore[arg-type]


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return args.mechanism or sorted(MECHANISMS)


def _password(args: argparse.Namespace) -> str:
    password: str = args.password if args.password is not None else getpass.getpass(f"password for {args.name}: ")
    if not password:
        raise ValueError("the password must not be empty")
    return password


async def _add(args: argparse.Namespace, cluster: Cluster) -> int:
    await alter_scram_user(
        cluster, args.name, password=_password(args), mechanisms=_mechanisms(args), iterations=args.iterations
    )
    print(f"set {', '.join(_mechanisms(args))} credentials of {args.name}")
    return 0


async def _list(args: argparse.Namespace, cluster: Cluster) -> int:
    _print_users(await describe_scram_users(cluster))
    return 0


async def _delete(args: argparse.Namespace, cluster: Cluster) -> int:
    found = (await describe_scram_users(cluster, [args.name])).get(args.name, {})
    wanted = [m for m in _mechanisms(args) if m in found]
    if not wanted:
        raise ValueError(f"user {args.name} has no such credential")
    await alter_scram_user(cluster, args.name, mechanisms=wanted, delete=True)
    print(f"deleted {', '.join(wanted)} credentials of {args.name}")
    return 0


def _print_users(users: dict[str, dict[str, int]]) -> None:
    print(f"{'USER':<24} MECHANISMS")
    for user, mechs in sorted(users.items()):
        print(f"{user:<24} {', '.join(f'{m} (iterations={i})' for m, i in sorted(mechs.items()))}")


def _offline(args: argparse.Namespace) -> int:
    from ..broker.security.credentials import CredentialStore, ScramCredential, check_credential

    store = CredentialStore(Path(args.data_dir))
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    store.load()
    if args.users_command == "list":
        _print_users({u: {m: c.iterations for m, c in store.of_user(u).items()} for u in store.users()})
        return 0
    if args.users_command == "add":
        password = _password(args)
        for name in _mechanisms(args):
            mechanism = check_credential(args.name, name, args.iterations)
            store.put(args.name, name, ScramCredential.from_password(mechanism, password, args.iterations))
        store.save()
        print(f"set {', '.join(_mechanisms(args))} credentials of {args.name} in {store.path}")
        return 0
    removed = [m for m in _mechanisms(args) if store.remove(args.name, m)]
    if not removed:
        raise ValueError(f"user {args.name} has no such credential")
    store.save()
    print(f"deleted {', '.join(removed)} credentials of {args.name} in {store.path}")
    return 0
