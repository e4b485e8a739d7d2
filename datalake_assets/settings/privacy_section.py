"""Settings of privacy requests: ``[privacy]`` (``datalake_assets.privacy``; the identity rules
are ``spec/identity.py``)."""

import re
from typing import Annotated, Any

from pydantic import PlainValidator

from datalake_assets.settings.fields import Int, SettingsError, settings_model, type_name
from datalake_assets.spec.identity import DEFAULT_IDENTITY_TRAITS, DEFAULT_LINK_DEPTH

_TRAIT_RE = re.compile(r"[A-Za-z0-9_]{1,128}")


def _traits(traits: Any) -> tuple[str, ...]:
    if isinstance(traits, str) or not isinstance(traits, (list, tuple)):
        raise SettingsError(f"must be an array of trait names, got {type_name(traits)}")
    for i, t in enumerate(traits):
        if not isinstance(t, str) or not _TRAIT_RE.fullmatch(t):
            raise SettingsError(
                'invalid trait name; allowed: 1-128 characters from [A-Za-z0-9_], e.g. "email"',
                key=f"[{i}]",
            )
    if len(set(traits)) != len(traits):
        raise SettingsError("a trait is listed twice")
    return tuple(traits)


@settings_model
class PrivacySettings:
    """``[privacy]``: which traits identify a person, how far links are followed, how often
    the collector re-reads the suppression list."""

    identity_traits: Annotated[tuple[str, ...], PlainValidator(_traits)] = DEFAULT_IDENTITY_TRAITS
    link_depth: Int(0, 10) = DEFAULT_LINK_DEPTH
    suppression_reload_seconds: Int(1, 3600) = 10
