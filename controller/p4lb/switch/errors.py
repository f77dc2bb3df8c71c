"""What goes wrong with a switch, as one line for the user: unreachable, refused, or not the
primary controller; a refused write names the first update the switch refused."""

from __future__ import annotations

from typing import Any

from finsy.proto import p4r, rpc_status

from p4lb.pipeline.entries import Update


class SwitchError(Exception):
    """The switch could not be reached or refused a request; the message is one line."""


class NotPrimaryError(SwitchError):
    """Another controller with a higher (or the same) election id holds the switch."""


def describe_write_error(e: Any, batch: list[Update], address: str) -> str:
    """The first update the switch refused, from the per-update p4.Error details."""
    details = b""
    for key, value in e.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            details = value
    if details:
        status = rpc_status.Status()
        status.ParseFromString(details)
        for idx, anything in enumerate(status.details):
            err = p4r.Error()
            if anything.Unpack(err) and err.canonical_code != 0 and idx < len(batch):
                u = batch[idx]
                return (
                    f"switch at {address} refused {u.op} {u.entry.table} "
                    f"{dict(u.entry.match)}: {err.message or err.canonical_code}"
                )
    return f"write to {address} failed: {e.code().name} {e.details()}"
