"""The LTI tool's administration from the command line (deploy/README.md):

    python -m services.lti_cli register --issuer URL --client-id ID --auth-login-url URL \\
        --token-url URL --jwks-url URL --deployment ID [--deployment ID …]
    python -m services.lti_cli rotate-key      # a new signing key; the JWKS keeps the previous one
    python -m services.lti_cli jwks            # the public keys the LMS is given (JSON)
    python -m services.lti_cli send-scores     # post every waiting score now (also done in the background)

It acts on the configured database (DATABASE_URL, else the SQLite file), like the app.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import db, lti


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m services.lti_cli", description="LTI 1.3 tool administration.")
    sub = p.add_subparsers(dest="command", required=True)
    reg = sub.add_parser("register", help="register (or update) a platform")
    for name in ("issuer", "client-id", "auth-login-url", "token-url", "jwks-url"):
        reg.add_argument(f"--{name}", required=True)
    reg.add_argument("--deployment", action="append", required=True, help="a deployment id (repeat for more)")
    sub.add_parser("rotate-key", help="make a new signing key (the JWKS serves it and the previous one)")
    sub.add_parser("jwks", help="print the tool's public keys")
    sub.add_parser("send-scores", help="post every waiting score now")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "register":
            lti.register(args.issuer, args.client_id, args.auth_login_url, args.token_url, args.jwks_url,
                         args.deployment)
            print(f"registered {args.issuer} ({args.client_id})")
        elif args.command == "rotate-key":
            print(f"new signing key {lti.rotate_key()}")
        elif args.command == "jwks":
            print(json.dumps(lti.jwks(), indent=2))
        else:
            print(f"{lti.drain(limit=1000)} scores posted")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except db.Unavailable as err:
        print(f"error: the database is unavailable: {err}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
