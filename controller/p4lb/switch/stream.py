"""The P4Runtime StreamChannel of a session: requests go out through a queue, a thread sorts
what the switch sends (arbitration, digests, idle timeouts, ...) into an inbox per kind."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from finsy.proto import p4r, p4r_grpc

CONNECT_TIMEOUT_S = 3.0
KINDS = ("arbitration", "digest", "idle_timeout_notification", "error", "packet")


class Stream:
    """The StreamChannel: requests go through a queue, a thread sorts responses by kind."""

    def __init__(self, stub: p4r_grpc.P4RuntimeStub) -> None:
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.inbox: dict[str, queue.Queue[Any]] = {k: queue.Queue() for k in KINDS}
        self.closed = threading.Event()
        self.end_reason = ""
        self._call = stub.StreamChannel(self._requests())
        self._thread = threading.Thread(target=self._receive, name="p4rt-stream", daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            req = self._out.get()
            if req is None:
                return
            yield req

    def _receive(self) -> None:
        try:
            for rep in self._call:
                kind = rep.WhichOneof("update")
                if kind in self.inbox:
                    self.inbox[kind].put(rep)
        except grpc.RpcError as e:
            self.end_reason = f"{e.code().name}: {e.details()}"
        finally:
            self.closed.set()
            self.inbox["arbitration"].put(None)  # wake a handshake waiting for an answer

    def send(self, req: p4r.StreamMessageRequest) -> None:
        self._out.put(req)

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(CONNECT_TIMEOUT_S)
