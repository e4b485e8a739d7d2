"""Settings of privacy requests: ``[privacy]`` (``datalake_assets.privacy``; the identity rules
are ``spec/identity.py``)."""

import re
from typing import Annotated, Any

from pydantic import PlainValidator

from datalake_assets.settings.fields import Int, SettingsError, settings_model, string_array
from datalake_assets.spec.identity import DEFAULT_IDENTITY_TRAITS, DEFAULT_LINK_DEPTH

_TRAIT_RE = re.compile(r"[A-Za-z0-9_]{1,128}")


def _traits(value: Any) -> tuple[str, ...]:
    traits = string_array(
        value,
        "trait names",
        _TRAIT_RE,
        'invalid trait name; allowed: 1-128 characters from [A-Za-z0-9_], e.g. "email"',
    )
    if len(set(traits)) != len(traits):
        raise SettingsError("a trait is listed twice")
    return traits


@settings_model
class PrivacySettings:
    """``[privacy]``: which traits identify a person, how far links are followed, how often
    the collector re-reads the suppression list."""

    identity_traits: Annotated[tuple[str, ...], PlainValidator(_traits)] = DEFAULT_IDENTITY_TRAITS
    link_depth: Int(0, 10) = DEFAULT_LINK_DEPTH
    suppression_reload_seconds: Int(1, 3600) = 10
