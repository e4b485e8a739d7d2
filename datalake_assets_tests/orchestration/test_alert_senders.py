"""Delivery (orchestration/alerts/alert_senders.py) to an SMTP server on loopback that
requires a login: the password comes from the environment variable ``smtp_password_env``
names, and a missing one is logged, never raised and never shown."""

from __future__ import annotations

import logging

import pytest

from datalake_assets.orchestration.alerts.alert_message import RUN_FAILED, Alert
from datalake_assets.orchestration.alerts.alert_senders import send_alert
from datalake_assets.settings.alerts_section import AlertsSettings
from datalake_assets_tests.support.alert_receivers import MailReceiver

ALERT = Alert(kind=RUN_FAILED, source="web", hour="2026-11-27T09", what="run failed")
ENV = "LAKE_TEST_SMTP_PASSWORD"
SENDER_LOG = "datalake_assets.orchestration.alerts.alert_senders"  # (aiosmtpd logs too)


def email_settings(port: int) -> AlertsSettings:
    return AlertsSettings(
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_from="lake@example.com",
        smtp_to=("oncall@example.com",),
        smtp_user="lake",
        smtp_password_env=ENV,
        smtp_starttls=False,
    )


# (a wrong password is not a case here: smtplib then tries aiosmtpd's other mechanism, which
# answers only at the client's timeout)
@pytest.mark.parametrize("password", ["right-one", None])
def test_the_smtp_login_takes_its_password_from_the_environment(password, monkeypatch, caplog):
    if password is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, password)
    with MailReceiver(login=("lake", "right-one")) as mail:
        with caplog.at_level(logging.ERROR):
            sent = send_alert(ALERT, email_settings(mail.port))
    errors = " ".join(r.getMessage() for r in caplog.records if r.name == SENDER_LOG)
    if password == "right-one":
        assert (sent, mail.logins, errors) == (["email"], ["lake"], "")
        assert [m["Subject"] for m in mail.messages] == [ALERT.title]
        return
    assert (sent, mail.messages) == ([], [])
    assert f"not sent by email through 127.0.0.1:{mail.port}" in errors
    assert f"the environment variable {ENV} (smtp_password_env) is empty or unset" in errors
    assert "right-one" not in errors


def test_nothing_configured_sends_nothing():
    assert send_alert(ALERT, AlertsSettings()) == []
