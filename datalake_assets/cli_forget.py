"""``datalake forget``: erase and suppress a person (``docs/privacy.md``); beside ``cli.py``,
which wires it in, so that the command line stays one module a newcomer can read."""

from __future__ import annotations

import argparse
import json
import sys

from datalake_assets.settings import LakeSettings


def add_forget_parser(sub) -> None:
    f = sub.add_parser("forget", help="erase and suppress a person's data (docs/privacy.md)")
    f.add_argument("--user-id", action="append", default=[], metavar="X")
    f.add_argument("--anonymous-id", action="append", default=[], metavar="X")
    f.add_argument("--trait", action="append", default=[], metavar="NAME=VALUE",
                   help="a trait listed in [privacy] identity_traits, e.g. email=a@b.com")
    f.add_argument("--file", help="a request file: JSON, or one KIND=VALUE per line")
    f.add_argument("--follow-links", action="store_true",
                   help="also forget the identities linked by identify/alias calls")
    f.add_argument("--source", action="append", default=[],
                   help="only this source (repeatable; default: every source)")
    f.add_argument("--no-erase", action="store_true", help="suppress only: erase nothing")
    f.add_argument("--no-suppress", action="store_true", help="erase only: do not suppress")
    f.add_argument("--request-id", help="[A-Za-z0-9_-]{1,64}; the same id re-runs the request")
    f.add_argument("--resume", action="store_true",
                   help="re-run every request that did not complete (killed or failed)")


def cmd_forget(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Erase and suppress the identities named (``docs/privacy.md``). Prints counts, never an
    identity value; exit 0 when completed, 1 when failed, 2 for a request that is refused."""
    from datalake_assets.privacy.forget import forget, resume
    from datalake_assets.privacy.request import request_from_options
    from datalake_assets.transform.session import settings_catalog

    try:
        if args.resume:
            if args.user_id or args.anonymous_id or args.trait or args.file or args.request_id:
                raise ValueError("--resume takes no identity or request id: it re-runs every "
                                 "request that did not complete, from its state")
            results = resume(settings, catalog=settings_catalog(settings))
        else:
            request = request_from_options(
                user_ids=args.user_id, anonymous_ids=args.anonymous_id, traits=args.trait,
                file=args.file, request_id=args.request_id, follow_links=args.follow_links,
                sources=args.source, erase=not args.no_erase, suppress=not args.no_suppress)
            results = [forget(settings, request, catalog=settings_catalog(settings))]
    except (ValueError, OSError) as e:  # IdentityError, RequestError: never hold a value
        print(f"datalake forget: {e}", file=sys.stderr)
        return 2
    for r in results:
        summary = {k: v for k, v in r.to_dict().items() if k != "identity_hashes"}
        summary["identities"] = len(r.identity_hashes)
        print(json.dumps(summary, indent=2))
    if args.resume and not results:
        print("no unfinished privacy request")
    return 0 if all(r.status == "completed" for r in results) else 1
