"""What an alert says, as one ``Alert`` and its two renderings: the webhook's JSON (Slack's
``{"text": ...}`` plus the structured fields, for a receiver that parses them) and the email.
Pure: no I/O, so every wording is tested in milliseconds."""

from __future__ import annotations

import dataclasses
from email.message import EmailMessage

RUN_FAILED = "run_failed"
CHECK_FAILED = "check_failed"
STALE = "freshness_failed"
_TITLES = {
    RUN_FAILED: "Run failed",
    CHECK_FAILED: "Blocking check failed",
    STALE: "Stopped arriving",
}


@dataclasses.dataclass(frozen=True)
class Alert:
    kind: str  # RUN_FAILED, CHECK_FAILED or STALE
    source: str  # the source's slug(s), or the job's name when no source is known
    hour: str  # the hour(s) (partition keys), "" when none applies
    what: str  # what failed, one line
    run_id: str = ""  # the run it is about ("" for none: a stale table never synced)
    link: str = ""  # <ui_url>/runs/<run_id>, or the UI's asset page
    details: str = ""  # the error, the check's description (may be several lines)

    @property
    def title(self) -> str:
        return f"[datalake] {_TITLES[self.kind]}: {self.source}" + (
            f" {self.hour}" if self.hour else ""
        )


def run_link(ui_url: str, run_id: str) -> str:
    return f"{ui_url.rstrip('/')}/runs/{run_id}"


def asset_link(ui_url: str, path: list[str]) -> str:
    return f"{ui_url.rstrip('/')}/assets/{'/'.join(path)}"


def alert_text(alert: Alert) -> str:
    """The message a person reads (the webhook's ``text``, the email's body)."""
    lines = [alert.title, alert.what]
    if alert.details:
        lines.append(alert.details[:2000])  # a Spark stack trace does not fit a chat message
    if alert.link:
        lines.append(alert.link)
    return "\n".join(lines)


def webhook_payload(alert: Alert) -> dict:
    """Slack's incoming-webhook body (``text``), with the alert's fields beside it."""
    return {
        "text": alert_text(alert),
        "kind": alert.kind,
        "source": alert.source,
        "hour": alert.hour,
        "what": alert.what,
        "run_id": alert.run_id,
        "link": alert.link,
    }


def email_message(alert: Alert, sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = alert.title
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg.set_content(alert_text(alert) + "\n")
    return msg
