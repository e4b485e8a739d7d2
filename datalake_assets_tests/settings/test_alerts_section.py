"""``[alerts]`` (settings/alerts_section.py): what loads, what fails and how it says so."""

from __future__ import annotations

import pytest

from datalake_assets.settings import SettingsError
from datalake_assets_tests.support.settings_files import load_lake_toml

EMAIL = """
[alerts]
smtp_host = "mail.example.com"
smtp_port = 2525
smtp_from = "lake@example.com"
smtp_to = ["data-team@example.com", "oncall@example.com"]
smtp_user = "lake"
smtp_password_env = "LAKE_SMTP_PASSWORD"
smtp_starttls = false
freshness_hours = 6
ui_url = "https://dagster.example.com/"
"""


def test_no_destination_by_default(tmp_path):
    alerts = load_lake_toml(tmp_path, "").alerts
    assert not alerts.enabled
    assert (alerts.freshness_hours, alerts.ui_url) == (3, "http://localhost:3000")
    assert alerts.smtp_password_env == "DATALAKE_SMTP_PASSWORD"


def test_email_settings_load(tmp_path):
    alerts = load_lake_toml(tmp_path, EMAIL).alerts
    assert alerts.enabled and alerts.email and not alerts.webhook_url
    assert alerts.smtp_to == ("data-team@example.com", "oncall@example.com")
    assert (alerts.smtp_port, alerts.smtp_starttls, alerts.freshness_hours) == (2525, False, 6)
    assert alerts.ui_url == "https://dagster.example.com"  # links join without "//"


def test_the_webhook_url_comes_from_the_environment_and_never_shows(tmp_path):
    secret = "https://hooks.slack.example/services/T000/B000/s3cr3t"
    settings = load_lake_toml(tmp_path, "", env={"DATALAKE_ALERTS_WEBHOOK_URL": secret})
    assert settings.alerts.webhook_url == secret and settings.alerts.enabled
    assert "s3cr3t" not in repr(settings)
    with pytest.raises(SettingsError) as e:
        load_lake_toml(tmp_path, '[alerts]\nwebhook_url = "ftp://x/s3cr3t"\n')
    assert "alerts.webhook_url" in str(e.value) and "s3cr3t" not in str(e.value)


@pytest.mark.parametrize(
    "text, key, fragment",
    [
        ('smtp_to = ["a@example.com"]\n', "alerts.smtp_to", "set smtp_host too"),
        ('smtp_host = "mail"\nsmtp_to = ["a@example.com"]\n', "alerts.smtp_from", "required"),
        ('smtp_host = "mail"\nsmtp_from = "a@example.com"\n', "alerts.smtp_to", "required"),
        ('smtp_to = ["not an address"]\n', "alerts.smtp_to[0]", "invalid address"),
        ('smtp_password = "hunter2"\n', "alerts.smtp_password", "smtp_password_env"),
        ('smtp_password_env = "A-B"\n', "alerts.smtp_password_env", "variable"),
        ("freshness_hours = 0\n", "alerts.freshness_hours", "from 1 to 168"),
        ('ui_url = "localhost:3000"\n', "alerts.ui_url", "http"),
    ],
)
def test_invalid_alert_settings(tmp_path, text, key, fragment):
    with pytest.raises(SettingsError) as e:
        load_lake_toml(tmp_path, "[alerts]\n" + text)
    assert key in str(e.value) and fragment in str(e.value), str(e.value)
    assert "hunter2" not in str(e.value)
