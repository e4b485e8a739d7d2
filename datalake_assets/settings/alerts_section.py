"""``[alerts]``: where the alerts of ``orchestration/alerts/`` go (a Slack-compatible webhook,
email over SMTP), the Dagster UI their links point to, and how old a table's latest hour may
get before its freshness fails (``docs/guides/alerts.md``)."""

import dataclasses
import re
from typing import Annotated, Any

from pydantic import PlainValidator, model_validator

from datalake_assets.settings.fields import (
    ENDPOINT_RE,
    Bool,
    Int,
    Match,
    SettingsError,
    settings_model,
    string_array,
)

# An address as SMTP sends it (no display name): what a typo most often breaks is caught
# here, when the settings load, not by the first alert that bounces.
_ADDRESS = r"[^@\s<>\"',;]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
_ADDRESS_RULE = "an email address such as 'data-team@example.com'"
_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}"
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
DEFAULT_UI_URL = "http://localhost:3000"
DEFAULT_PASSWORD_ENV = "DATALAKE_SMTP_PASSWORD"


def _recipients(value: Any) -> tuple[str, ...]:
    return string_array(
        value, "email addresses", re.compile(_ADDRESS), f"invalid address; allowed: {_ADDRESS_RULE}"
    )


def _webhook(value: Any) -> str:
    # The URL's value is never repeated in an error: a Slack webhook's path is its secret.
    if not isinstance(value, str):
        raise SettingsError("must be a string (an http:// or https:// URL)")
    if value and not re.fullmatch(ENDPOINT_RE, value):
        raise SettingsError("invalid webhook URL (value not shown); allowed: an http(s) URL")
    return value


@settings_model
class AlertsSettings:
    """Alerts on a failed run, a failed blocking asset check and a table that stopped
    arriving (``orchestration/alerts/``), sent to ``webhook_url`` and/or by email. With
    neither configured there are no alert sensors; the freshness policies are always set."""

    # Slack-compatible incoming webhook: POSTed {"text": ..., plus structured fields}. It
    # holds a secret token: keep it out of the file with DATALAKE_ALERTS_WEBHOOK_URL.
    webhook_url: Annotated[str, PlainValidator(_webhook)] = dataclasses.field(
        default="", repr=False
    )
    smtp_host: Match(_HOST, "SMTP host", "a host name or address", empty=True) = ""
    smtp_port: Int(1, 65535) = 587
    smtp_from: Match(_ADDRESS, "sender", _ADDRESS_RULE, empty=True) = ""
    smtp_to: Annotated[tuple[str, ...], PlainValidator(_recipients)] = ()
    # login name; the password is read from the environment variable smtp_password_env
    # names when an email is sent, never from this file
    smtp_user: Match(r"[^\s]{1,256}", "SMTP user", "a login name", empty=True) = ""
    smtp_password_env: Match(
        _ENV_NAME, "variable name", "an environment variable's name such as 'SMTP_PASSWORD'"
    ) = DEFAULT_PASSWORD_ENV
    smtp_starttls: Bool = True  # upgrade the connection with STARTTLS before logging in
    # a table fails its freshness when its latest hour landed longer ago than this; a day's
    # models when the day is not built this many hours after midnight UTC (at most 23)
    freshness_hours: Int(1, 168) = 3
    # the Dagster UI as the alert's reader reaches it: links are <ui_url>/runs/<run id>
    ui_url: Match(ENDPOINT_RE, "UI URL", "an http:// or https:// URL") = DEFAULT_UI_URL

    @model_validator(mode="after")
    def _email_complete(self) -> "AlertsSettings":
        object.__setattr__(self, "ui_url", self.ui_url.rstrip("/"))
        if not self.smtp_host:
            for name in ("smtp_from", "smtp_to", "smtp_user"):
                if getattr(self, name):
                    raise SettingsError("only applies to email: set smtp_host too", key=name)
            return self
        for name in ("smtp_from", "smtp_to"):
            if not getattr(self, name):
                raise SettingsError("required to send email (smtp_host is set)", key=name)
        return self

    @property
    def email(self) -> bool:
        return bool(self.smtp_host)

    @property
    def enabled(self) -> bool:
        """Whether any destination is configured (else: no alert sensors)."""
        return bool(self.webhook_url) or self.email
