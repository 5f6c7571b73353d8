"""``python -m dashboard hash-password``: the ``password_hash`` for a team server's config.

Why a command: the dashboard's config (``dashboard.access``) stores a password as a salted scrypt
hash, never the password itself, so that reading the file (a backup, a shared home) does not sign
anyone in. The password is read without echo at a terminal, or as one line from standard input
(for scripts); the hash is printed on standard output, ready for ``[auth] password_hash = "..."``
or ``QNN_LAB_PASSWORD_HASH``.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from dashboard.errors import UserError

MIN_LENGTH = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dashboard.access import hash_password

    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            raise UserError("the two passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if len(password) < MIN_LENGTH:
        raise UserError(f"the password must have at least {MIN_LENGTH} characters")
    print(hash_password(password))
    return 0
