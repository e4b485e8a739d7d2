"""The two destinations of alerts, on loopback: a webhook receiver (``http.server`` in a
thread, keeping each JSON body it is POSTed) and an SMTP server (aiosmtpd's ``Controller``,
keeping each message, optionally requiring a login). Both bind port 0 and say which port they
got."""

from __future__ import annotations

import json
import threading
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class WebhookReceiver:
    """``with WebhookReceiver() as hook:`` POSTs to ``hook.url`` land in ``hook.bodies``;
    ``status`` is what it answers (a 500 to play a destination that is failing)."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict] = []
        self.status = status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.messages.append(message_from_bytes(envelope.original_content, policy=policy.default))
        return "250 OK"


class _PortZeroController(Controller):
    # aiosmtpd connects to its own port once started, to check it answers: with port 0 that
    # is the port the server was given, not 0
    def _trigger_server(self) -> None:
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


class MailReceiver:
    """``with MailReceiver(login=("lake", "pw")) as mail:`` an SMTP server on
    ``127.0.0.1:mail.port``; ``mail.messages`` what it accepted (only after a login with
    ``login``, when given)."""

    def __init__(self, login: tuple[str, str] | None = None) -> None:
        self.inbox = _Inbox()
        self.logins: list[str] = []
        auth = {}
        if login is not None:

            def authenticate(server, session, envelope, mechanism, data):
                ok = (
                    isinstance(data, LoginPassword)
                    and (
                        data.login.decode(),
                        data.password.decode(),
                    )
                    == login
                )
                if ok:
                    self.logins.append(data.login.decode())
                return AuthResult(success=ok)

            # the test server has no TLS; a real one would require it before AUTH
            auth = {"authenticator": authenticate, "auth_require_tls": False, "auth_required": True}
        self.controller = _PortZeroController(self.inbox, hostname="127.0.0.1", port=0, **auth)

    @property
    def messages(self) -> list[EmailMessage]:
        return self.inbox.messages

    def bodies(self) -> list[str]:
        """Each message's text, decoded, with the line ends it had before SMTP."""
        return [m.get_content().replace("\r\n", "\n") for m in self.messages]

    @property
    def port(self) -> int:
        return self.controller.port

    def __enter__(self) -> MailReceiver:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()
