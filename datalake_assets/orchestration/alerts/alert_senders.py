"""Sending an ``Alert`` to every configured destination: the webhook (HTTP POST of JSON) and
email (SMTP, STARTTLS, a login whose password comes from the environment). A destination that
fails is logged and skipped: an alert that cannot be sent must never fail the sensor (its
cursor would not move, and every tick would retry and fail again)."""

from __future__ import annotations

import json
import logging
import os
import smtplib
import ssl
import urllib.parse
import urllib.request

from datalake_assets.orchestration.alerts.alert_message import (
    Alert,
    email_message,
    webhook_payload,
)
from datalake_assets.settings.alerts_section import AlertsSettings

TIMEOUT_S = 15  # a destination that hangs must not hold the sensor past its tick

log = logging.getLogger(__name__)


def send_alert(alert: Alert, alerts: AlertsSettings, logger: logging.Logger = log) -> list[str]:
    """Sends ``alert`` everywhere configured; the destinations it reached."""
    sent = []
    if alerts.webhook_url:
        try:
            post_webhook(alerts.webhook_url, webhook_payload(alert))
            sent.append("webhook")
        except Exception as e:  # noqa: BLE001 - never fails the sensor (module docstring)
            # the URL is a secret (Slack's token is its path): name the host only
            host = urllib.parse.urlparse(alerts.webhook_url).hostname
            logger.error("alert %r not sent to the webhook at %s: %s", alert.title, host, e)
    if alerts.email:
        try:
            send_email(alert, alerts)
            sent.append("email")
        except Exception as e:  # noqa: BLE001 - never fails the sensor (module docstring)
            logger.error(
                "alert %r not sent by email through %s:%s: %s",
                alert.title,
                alerts.smtp_host,
                alerts.smtp_port,
                e,
            )
    return sent


def post_webhook(url: str, payload: dict) -> None:
    body = json.dumps(payload).encode()
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        resp.read()  # urlopen raises HTTPError on a 4xx/5xx answer


def send_email(alert: Alert, alerts: AlertsSettings) -> None:
    msg = email_message(alert, alerts.smtp_from, alerts.smtp_to)
    with smtplib.SMTP(alerts.smtp_host, alerts.smtp_port, timeout=TIMEOUT_S) as smtp:
        if alerts.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if alerts.smtp_user:
            password = os.environ.get(alerts.smtp_password_env)
            if not password:
                raise RuntimeError(
                    f"smtp_user is set but the environment variable "
                    f"{alerts.smtp_password_env} (smtp_password_env) is empty or unset"
                )
            smtp.login(alerts.smtp_user, password)
        smtp.send_message(msg)
