"""One loopback address in front of several collectors, as a TCP load balancer puts one: each
new connection goes to the next collector in turn, and its bytes are relayed both ways."""

from __future__ import annotations

import itertools
import socket
import threading
from collections import Counter


class RoundRobin:
    def __init__(self, urls: list[str]) -> None:
        backends = []
        for url in urls:
            host, port = url.split("://", 1)[1].rsplit(":", 1)
            backends.append((host, int(port)))
        self._next = itertools.cycle(backends)
        self.connections: Counter[tuple[str, int]] = Counter()  # backend -> connections sent
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)  # so that close() is noticed by the accepting thread
        self._closed = threading.Event()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            backend = next(self._next)
            self.connections[backend] += 1
            upstream = socket.create_connection(backend)
            pair = _Pair(client, upstream)
            threading.Thread(target=pair.relay, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pair.relay, args=(upstream, client), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(10)
        self._listener.close()

    def __enter__(self) -> RoundRobin:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _Pair:
    """A client's connection and its upstream one: each direction relayed until its end of
    file, which is passed on; the second direction to end closes both."""

    def __init__(self, a: socket.socket, b: socket.socket) -> None:
        self.sockets = (a, b)
        self._open = 2
        self._lock = threading.Lock()

    def relay(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:  # a side reset the connection: so does the relay, both ways
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        with self._lock:
            self._open -= 1
            last = self._open == 0
        if last:
            for s in self.sockets:
                s.close()
