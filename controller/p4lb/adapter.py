"""The one place that talks P4Runtime, through p4runtime-shell's client.

Everything else hands this module Entry values and gets Entry values back."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2
from p4runtime_sh import p4runtime as shp4rt

from p4lb.entries import MULTICAST, OWNED_TABLES, Entry, Update
from p4lb.p4info import BMV2_JSON_NAME, P4INFO_NAME, Schema, compiled_dir, load_p4info, schema

log = logging.getLogger("p4lb")

CONNECT_TIMEOUT_S = 3.0
RPC_TIMEOUT_S = 10.0


class SwitchError(Exception):
    """The switch could not be reached or refused a request; the message is one line."""


@contextmanager
def _quiet_shell() -> Iterator[None]:
    # p4runtime-shell logs at CRITICAL and calls sys.exit() on a failed handshake;
    # we turn both into one SwitchError line.
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


class _Client(shp4rt.P4RuntimeClient):  # type: ignore[misc]
    """p4runtime-shell's client, remembering whether we won the arbitration."""

    is_primary = False

    def handshake(self) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id[0]
        req.arbitration.election_id.low = self.election_id[1]
        self.stream_out_q.put(req)
        rep = self.get_stream_packet("arbitration", timeout=CONNECT_TIMEOUT_S)
        if rep is None:
            raise SwitchError("no arbitration answer")
        self.is_primary = rep.arbitration.status.code == 0


@dataclass
class CounterValue:
    packets: int
    bytes: int


class Switch:
    """A P4Runtime session with one switch (device) as one election id."""

    def __init__(
        self, address: str, device_id: int, election_id: int, info: Schema | None = None
    ) -> None:
        self.address = address
        self.device_id = device_id
        try:
            grpc.channel_ready_future(grpc.insecure_channel(address)).result(
                timeout=CONNECT_TIMEOUT_S
            )
        except grpc.FutureTimeoutError:
            raise SwitchError(
                f"switch at {address} is unreachable (no P4Runtime server "
                f"answered within {CONNECT_TIMEOUT_S:.0f} s)"
            ) from None
        try:
            with _quiet_shell():
                self.client = _Client(device_id, address, (0, election_id))
        except (SystemExit, SwitchError, shp4rt.P4RuntimeException) as e:
            raise SwitchError(f"switch at {address}: P4Runtime session failed ({e})") from None
        self.is_primary = bool(self.client.is_primary)
        self.schema = info or schema()

    def close(self) -> None:
        with _quiet_shell():
            self.client.tear_down()

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ pipeline

    def ensure_pipeline(self, directory: Path | None = None) -> bool:
        """Push our P4Info + BMv2 JSON unless the switch already runs exactly them."""
        d = directory or compiled_dir()
        ours = load_p4info(d / P4INFO_NAME)
        try:
            with _quiet_shell():
                theirs = self.client.get_p4info()
            if theirs == ours:
                return False
        except shp4rt.P4RuntimeException:
            pass  # no pipeline yet
        self._require_primary("set the pipeline")
        try:
            with _quiet_shell():
                self.client.set_fwd_pipe_config(str(d / P4INFO_NAME), str(d / BMV2_JSON_NAME))
        except shp4rt.P4RuntimeException as e:
            raise SwitchError(f"switch at {self.address} refused the pipeline: {e}") from None
        return True

    def _require_primary(self, what: str) -> None:
        if not self.is_primary:
            raise SwitchError(
                f"cannot {what}: another controller with a higher election id "
                f"is primary on {self.address}"
            )

    # ------------------------------------------------------------ reads

    def _read(self, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.append(entity)
        try:
            out: list[p4runtime_pb2.Entity] = []
            for rep in self.client.stub.Read(req, timeout=RPC_TIMEOUT_S):
                out.extend(rep.entities)
            return out
        except grpc.RpcError as e:
            raise SwitchError(f"read from {self.address} failed: {e.details()}") from None

    def read_entries(self, tables: tuple[str, ...] = OWNED_TABLES) -> list[Entry]:
        """Every entry of the given tables (and the flood group), as Entry values: one Read
        for all tables, its responses decoded from the wire (see decode_read_response)."""
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        for name in tables:
            req.entities.add().table_entry.table_id = self.schema.table(name).id
        read_raw = self.client.channel.unary_stream(
            "/p4.v1.P4Runtime/Read",
            request_serializer=p4runtime_pb2.ReadRequest.SerializeToString,
            response_deserializer=None,
        )
        out: list[Entry] = []
        try:
            for raw in read_raw(req, timeout=RPC_TIMEOUT_S):
                out.extend(self.schema.decode_read_response(raw))
        except grpc.RpcError as e:
            raise SwitchError(f"read from {self.address} failed: {e.details()}") from None
        out.extend(self._read_multicast())
        return out

    def _read_multicast(self) -> list[Entry]:
        ent = p4runtime_pb2.Entity()
        ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        try:
            found = self._read(ent)
        except SwitchError:
            return []
        out = []
        for e in found:
            g = e.packet_replication_engine_entry.multicast_group_entry
            ports = sorted(r.egress_port for r in g.replicas)
            out.append(
                Entry(
                    MULTICAST,
                    (("group_id", g.multicast_group_id),),
                    "replicate",
                    tuple((f"port{p}", p) for p in ports),
                )
            )
        return out

    def read_counter(self, name: str) -> dict[int, CounterValue]:
        """All cells of an indirect counter, by index."""
        ent = p4runtime_pb2.Entity()
        ent.counter_entry.counter_id = self.schema.counter_id(name)
        out = {}
        for e in self._read(ent):
            c = e.counter_entry
            out[c.index.index] = CounterValue(c.data.packet_count, c.data.byte_count)
        return out

    # ------------------------------------------------------------ writes

    def _entity(self, entry: Entry, ent: p4runtime_pb2.Entity) -> None:
        """Fill `ent` (a message inside the request) in place."""
        if entry.table == MULTICAST:
            g = ent.packet_replication_engine_entry.multicast_group_entry
            g.multicast_group_id = entry.exact("group_id")
            for rid, (_, port) in enumerate(entry.params):
                g.replicas.add(egress_port=port, instance=rid + 1)
        else:
            self.schema.encode(entry, into=ent.table_entry)

    def write(self, batch: list[Update], idle_timeout_ns: int = 0) -> None:
        """One WriteRequest; on failure, name the first update the switch refused."""
        self._require_primary("write")
        req = p4runtime_pb2.WriteRequest()
        for u in batch:
            upd = req.updates.add()
            upd.type = getattr(p4runtime_pb2.Update, u.op)
            self._entity(u.entry, upd.entity)
            if idle_timeout_ns and upd.entity.HasField("table_entry"):
                upd.entity.table_entry.idle_timeout_ns = idle_timeout_ns
        self._send(req, batch)

    def _send(self, req: p4runtime_pb2.WriteRequest, batch: list[Update] | None = None) -> None:
        # Not p4runtime-shell's client.write(): its error parser (0.0.6) loops forever on a
        # batch whose per-update statuses mix OK and errors, which is what BMv2 returns.
        req.device_id = self.device_id
        req.election_id.high = self.client.election_id[0]
        req.election_id.low = self.client.election_id[1]
        try:
            self.client.stub.Write(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            raise SwitchError(_describe_write_error(e, batch or [], self.address)) from None

    def write_plan(self, batches: list[list[Update]]) -> int:
        for b in batches:
            self.write(b)
        return sum(len(b) for b in batches)

    # ------------------------------------------------------------ stream

    def enable_digest(self, name: str = "conn_digest_t") -> None:
        """Ask for digests at once (no batching delay), so collision entries land fast."""
        digest = self.schema.digests.get(name)
        if digest is None:
            raise SwitchError(f"P4Info has no digest {name!r}")
        ent = p4runtime_pb2.Entity()
        d = ent.digest_entry
        d.digest_id = digest.preamble.id
        d.config.max_timeout_ns = 0
        d.config.max_list_size = 1
        d.config.ack_timeout_ns = 1_000_000_000
        for op in ("INSERT", "MODIFY"):
            req = p4runtime_pb2.WriteRequest()
            upd = req.updates.add()
            upd.type = getattr(p4runtime_pb2.Update, op)
            upd.entity.CopyFrom(ent)
            try:
                self._send(req)
                return
            except SwitchError:
                continue
        raise SwitchError(f"switch at {self.address} refused the digest configuration")

    def next_stream_message(self, kind: str, timeout: float) -> Any:
        """The next digest / idle-timeout message, or None after `timeout` seconds."""
        return self.client.get_stream_packet(kind, timeout=timeout)

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.digest_ack.digest_id = digest_id
        req.digest_ack.list_id = list_id
        self.client.stream_out_q.put(req)


def _describe_write_error(e: Any, batch: list[Update], address: str) -> str:
    """The first update the switch refused, from the per-update p4.Error details."""
    details = b""
    for key, value in e.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            details = value
    if details:
        status = status_pb2.Status()
        status.ParseFromString(details)
        for idx, anything in enumerate(status.details):
            err = p4runtime_pb2.Error()
            if anything.Unpack(err) and err.canonical_code != 0 and idx < len(batch):
                u = batch[idx]
                return (
                    f"switch at {address} refused {u.op} {u.entry.table} "
                    f"{dict(u.entry.match)}: {err.message or err.canonical_code}"
                )
    return f"write to {address} failed: {e.code().name} {e.details()}"
