"""``datalake forget``: erase and suppress a person (``docs/guides/forget-a-person.md``); beside ``cli.py``,
which wires it in (its options: ``cli_parser.py``), so that the command line stays one module a
newcomer can read."""

from __future__ import annotations

import argparse
import json

from datalake_assets.cli_parser import UsageError
from datalake_assets.settings import LakeSettings


def cmd_forget(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Erase and suppress the identities named (``docs/guides/forget-a-person.md``). Prints counts, never an
    identity value; exit 0 when completed, 1 when failed, 2 for a request that is refused."""
    from datalake_assets.privacy.forget import forget, resume
    from datalake_assets.privacy.forget_request import request_from_options
    from datalake_assets.transform.session import settings_catalog

    try:
        if args.resume:
            if args.user_id or args.anonymous_id or args.trait or args.file or args.request_id:
                raise ValueError(
                    "--resume takes no identity or request id: it re-runs every "
                    "request that did not complete, from its state"
                )
            results = resume(settings, catalog=settings_catalog(settings, quiet=True))
        else:
            request = request_from_options(
                user_ids=args.user_id,
                anonymous_ids=args.anonymous_id,
                traits=args.trait,
                file=args.file,
                request_id=args.request_id,
                follow_links=args.follow_links,
                sources=args.source,
                erase=not args.no_erase,
                suppress=not args.no_suppress,
            )
            results = [forget(settings, request, catalog=settings_catalog(settings, quiet=True))]
    except (ValueError, OSError) as e:  # IdentityError, RequestError: never hold a value
        raise UsageError(str(e)) from None
    from datalake_assets.models.erasure import reach_models

    models_ok = True
    for r in results:
        summary = {k: v for k, v in r.to_dict().items() if k != "identity_hashes"}
        summary["identities"] = len(r.identity_hashes)
        # the models (sessions, users, ...) are rebuilt without the person and proved
        models = reach_models(settings, r)
        if models is not None:
            summary.update(models)
            models_ok &= not models["models_rows_remaining"] and not models["models_errors"]
        print(json.dumps(summary, indent=2))
    if args.resume and not results:
        print("no unfinished privacy request")
    return 0 if models_ok and all(r.status == "completed" for r in results) else 1
