"""The P4Runtime client: a small synchronous session with one switch on grpcio (arbitration,
pipeline, reads, writes, the stream). With its codec, stream and errors, the one place that
talks P4Runtime: everything else hands it Entry values and gets Entry values back.

Why not finsy's Switch: finsy is asyncio-only (its Switch is an async context manager driven
by an event loop), while p4lb is a CLI of one-shot commands, a long-running loop and tests
that call the switch from plain threads. Wrapping finsy would mean an event loop in a
background thread and every call marshalled into it, to use perhaps a tenth of finsy. What
the controller needs is small: arbitration that reports whether we are primary (and lets a
one-shot command retry), table/counter/multicast reads and writes, digests and idle-timeout
notifications from the stream. So this module is our own client, and finsy supplies the
protobuf bindings (`finsy.proto`): they are the only published P4Runtime bindings generated
for protobuf >= 4, so messages are parsed by protobuf's compiled (upb) parser.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4i, p4r, p4r_grpc

from p4lb.intent.model import TlsSettings
from p4lb.intent.reader import is_loopback
from p4lb.pipeline.entries import MULTICAST, OWNED_TABLES, Entry, Update
from p4lb.pipeline.p4info import (
    BMV2_JSON_NAME,
    P4INFO_NAME,
    Schema,
    compiled_dir,
    load_p4info,
    schema,
)
from p4lb.switch import codec
from p4lb.switch.errors import NotPrimaryError, SwitchError, describe_write_error
from p4lb.switch.stream import CONNECT_TIMEOUT_S, Stream
from p4lb.switch.transport import Transport, probe

log = logging.getLogger("p4lb")

RPC_TIMEOUT_S = 10.0
# google.rpc.Code OK: the arbitration answer that makes us primary.
_OK = 0
# A full read of the slot tables (65,536 entries) is over gRPC's default 4 MiB message.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20)]

# BMv2's P4Runtime server can crash (a segfault in PI's p4info library) when it is read
# while its pipeline is being set. Within this process, reads and pipeline pushes of one
# switch take turns: the tier's members read each other's switches, the metrics sampler
# reads every switch, while a session may be pushing a pipeline.
_TURNS: dict[str, threading.Lock] = {}
_TURNS_LOCK = threading.Lock()


def _turn(address: str) -> threading.Lock:
    """The lock reads and pipeline pushes of the switch at `address` take turns on."""
    with _TURNS_LOCK:
        return _TURNS.setdefault(address, threading.Lock())


@dataclass
class CounterValue:
    packets: int
    bytes: int


def credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    """gRPC's TLS credentials from the files `tls` names (a file that cannot be read: a
    SwitchError naming it)."""
    data: dict[str, bytes | None] = {}
    for key in ("ca", "cert", "key"):
        path = getattr(tls, key)
        try:
            data[key] = Path(path).read_bytes() if path else None
        except PermissionError:
            raise  # the running lab's key is root's: the CLI says to use sudo
        except OSError as e:
            raise SwitchError(f"tls.{key}: cannot read {path}: {e.strerror}") from None
    return grpc.ssl_channel_credentials(
        root_certificates=data["ca"], private_key=data["key"], certificate_chain=data["cert"]
    )


def not_ready(address: str, tls: TlsSettings | None) -> str:
    """Why no session came up within the connect timeout, from a probe of the address:
    nothing listens, no answer, a switch that takes TLS only (and the config has none), or
    a failed TLS handshake."""
    found = probe(address)
    within = f"within {CONNECT_TIMEOUT_S:.0f} s"
    if found is Transport.REFUSED:
        return f"switch at {address} is unreachable (connection refused: nothing listens there)"
    if found is Transport.SILENT:
        return f"switch at {address} is unreachable (no P4Runtime server answered {within})"
    if tls is None and found is Transport.TLS:
        return (
            f"switch at {address} refused clear text: it requires TLS; give the config a "
            "[switch.tls] table (the running make run's config has one: sudo p4lb ... uses "
            "it by default)"
        )
    if tls is not None and found is Transport.OTHER:
        return f"switch at {address} does not answer TLS (the config's tls expects it {within})"
    if tls is not None:
        return (
            f"switch at {address}: the TLS handshake failed (switch certificate not signed by "
            f"{tls.ca}, or the switch refused our client certificate)"
        )
    return f"switch at {address} is unreachable (no P4Runtime server answered {within})"


class Switch:
    """A P4Runtime session with one switch (device) as one election id."""

    def __init__(
        self,
        address: str,
        device_id: int,
        election_id: int | None,
        info: Schema | None = None,
        tls: TlsSettings | None = None,
        insecure: bool = False,
    ) -> None:
        """Connect (over TLS with `tls`, presenting its client certificate if it has one;
        without, clear text only to a loopback address unless `insecure`); with an election
        id, open the stream and take part in arbitration (see is_primary); with None, a
        reader: no stream, reads only."""
        if tls is None and not insecure and not is_loopback(address):
            raise SwitchError(
                f"switch at {address}: refusing clear-text P4Runtime to a non-loopback "
                "address (configure tls, or insecure = true)"
            )
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.schema = info or schema()
        self._primary = False
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        else:
            options: list[tuple[str, int | str]] = list(_CHANNEL_OPTIONS)
            if tls.server_name:
                options.append(("grpc.ssl_target_name_override", tls.server_name))
            self._channel = grpc.secure_channel(address, credentials(tls), options=options)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=CONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise SwitchError(not_ready(address, tls)) from None
        self.stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._stream: Stream | None = None
        if election_id is None:
            return
        self._stream = Stream(self.stub)
        try:
            self._handshake(election_id)
        except SwitchError:
            self.close()
            raise

    def _handshake(self, election_id: int) -> None:
        assert self._stream is not None
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & (2**64 - 1)
        self._stream.send(req)
        try:
            answer = self._stream.inbox["arbitration"].get(timeout=CONNECT_TIMEOUT_S)
        except queue.Empty:
            answer = None
        if answer is None:
            why = self._stream.end_reason or "no arbitration answer"
            raise NotPrimaryError(f"switch at {self.address}: P4Runtime session refused ({why})")
        self._note_arbitration(answer)

    def _note_arbitration(self, rep: p4r.StreamMessageResponse) -> None:
        self._primary = rep.arbitration.status.code == _OK

    @property
    def is_primary(self) -> bool:
        """Whether this session is the primary controller, as of the last update received."""
        if self._stream is None:
            return False
        q = self._stream.inbox["arbitration"]
        while True:
            try:
                update = q.get_nowait()
            except queue.Empty:
                break
            if update is not None:
                self._note_arbitration(update)
        return self._primary and not self._stream.closed.is_set()

    @property
    def alive(self) -> bool:
        """False once the stream to the switch has ended (switch gone or restarted)."""
        return self._stream is None or not self._stream.closed.is_set()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._channel.close()

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def decode(self, te: p4r.TableEntry) -> Entry:
        """A table entry the switch sent (read back, or reported idle) as an Entry."""
        return codec.decode(self.schema, te)

    # ------------------------------------------------------------ pipeline

    def _election(self, msg: Any) -> None:
        msg.device_id = self.device_id
        eid = self.election_id or 0
        msg.election_id.high = eid >> 64
        msg.election_id.low = eid & (2**64 - 1)

    def pipeline_p4info(self) -> p4i.P4Info | None:
        """The P4Info the switch runs; None when it has no pipeline yet."""
        get = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
        )
        try:
            rep = self.stub.GetForwardingPipelineConfig(get, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise SwitchError(f"switch at {self.address}: {e.details()}") from None
            return None  # no pipeline yet (BMv2 answers FAILED_PRECONDITION)
        return rep.config.p4info if rep.config.HasField("p4info") else None

    def ensure_pipeline(
        self, p4info_path: Path | None = None, device_config_path: Path | None = None
    ) -> bool:
        """Push a P4Info + BMv2 JSON (default: the committed lb program) unless the switch
        already runs exactly them."""
        p4info_path = p4info_path or compiled_dir() / P4INFO_NAME
        device_config_path = device_config_path or compiled_dir() / BMV2_JSON_NAME
        ours = load_p4info(p4info_path)
        if self.pipeline_p4info() == ours:
            return False
        self._require_primary("set the pipeline")
        req = p4r.SetForwardingPipelineConfigRequest(
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        )
        self._election(req)
        req.config.p4info.CopyFrom(ours)
        # p4c indents its JSON: deep expression trees make the file several times the
        # 4 MB a gRPC message may carry. The same JSON without whitespace is far smaller.
        req.config.p4_device_config = json.dumps(
            json.loads(device_config_path.read_bytes()), separators=(",", ":")
        ).encode()
        try:
            with _turn(self.address):
                self.stub.SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            raise SwitchError(
                f"switch at {self.address} refused the pipeline: {e.code().name} {e.details()}"
            ) from None
        return True

    def _require_primary(self, what: str) -> None:
        if not self.is_primary:
            raise NotPrimaryError(
                f"cannot {what}: another controller with a higher election id "
                f"is primary on {self.address}"
            )

    # ------------------------------------------------------------ reads

    def _read(self, req: p4r.ReadRequest) -> list[p4r.Entity]:
        req.device_id = self.device_id
        out: list[p4r.Entity] = []
        try:
            with _turn(self.address):
                for rep in self.stub.Read(req, timeout=RPC_TIMEOUT_S):
                    out.extend(rep.entities)
        except grpc.RpcError as e:
            raise SwitchError(f"read from {self.address} failed: {e.details()}") from None
        return out

    def read_entries(self, tables: tuple[str, ...] = OWNED_TABLES) -> list[Entry]:
        """Every entry of the given tables (and the flood group), as Entry values, read in
        one request."""
        req = p4r.ReadRequest()
        for name in tables:
            req.entities.add().table_entry.table_id = self.schema.table(name).id
        out = [self.decode(e.table_entry) for e in self._read(req)]
        out.extend(self._read_multicast())
        return out

    def _read_multicast(self) -> list[Entry]:
        req = p4r.ReadRequest()
        group = req.entities.add().packet_replication_engine_entry.multicast_group_entry
        group.multicast_group_id = 0  # every group
        try:
            found = self._read(req)
        except SwitchError:
            return []  # BMv2 refuses the read while no group exists
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

    def read_counter(self, name: str, index: int | None = None) -> dict[int, CounterValue]:
        """All cells of an indirect counter (or the one at `index`), by index."""
        req = p4r.ReadRequest()
        entry = req.entities.add().counter_entry
        entry.counter_id = self.schema.counter_id(name)
        if index is not None:
            entry.index.index = index
        out = {}
        for e in self._read(req):
            c = e.counter_entry
            out[c.index.index] = CounterValue(c.data.packet_count, c.data.byte_count)
        return out

    def read_direct_counter(self, name: str) -> list[tuple[Entry, CounterValue]]:
        """Every entry of a direct counter's table with its counts."""
        req = p4r.ReadRequest()
        table = self.schema.table(self.schema.direct_counter_table(name))
        req.entities.add().direct_counter_entry.table_entry.table_id = table.id
        out = []
        for e in self._read(req):
            d = e.direct_counter_entry
            out.append(
                (
                    self.decode(d.table_entry),
                    CounterValue(d.data.packet_count, d.data.byte_count),
                )
            )
        return out

    # ------------------------------------------------------------ writes

    def _entity(self, entry: Entry, ent: p4r.Entity) -> None:
        """Fill `ent` (a message inside the request) in place."""
        if entry.table == MULTICAST:
            g = ent.packet_replication_engine_entry.multicast_group_entry
            g.multicast_group_id = entry.exact("group_id")
            for rid, (_, port) in enumerate(entry.params):
                g.replicas.add(egress_port=port, instance=rid + 1)
        else:
            codec.encode(self.schema, entry, into=ent.table_entry)

    def write(self, batch: list[Update], idle_timeout_ns: int = 0) -> None:
        """One WriteRequest; on failure, name the first update the switch refused."""
        self._require_primary("write")
        req = p4r.WriteRequest()
        for u in batch:
            upd = req.updates.add()
            upd.type = p4r.Update.Type.Value(u.op)
            self._entity(u.entry, upd.entity)
            if idle_timeout_ns and upd.entity.HasField("table_entry"):
                upd.entity.table_entry.idle_timeout_ns = idle_timeout_ns
        self._send(req, batch)

    def _send(self, req: p4r.WriteRequest, batch: list[Update] | None = None) -> None:
        self._election(req)
        try:
            self.stub.Write(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.PERMISSION_DENIED:
                self._primary = False
                raise NotPrimaryError(
                    f"switch at {self.address} refused the write: this session "
                    f"(election id {self.election_id}) is no longer primary"
                ) from None
            raise SwitchError(describe_write_error(e, batch or [], self.address)) from None

    def set_meter_rates(self, name: str, first: int, count: int, rate: int, burst: int) -> None:
        """Meter cells first..first+count-1 of `name` at `rate` (its unit: packets or bytes
        per second) with `burst`, committed and peak alike (a single-rate policer)."""
        self._require_primary("write")
        meter_id = self.schema.meters[name].preamble.id if name in self.schema.meters else 0
        if not meter_id:
            raise SwitchError(f"the switch's program has no meter {name!r}")
        req = p4r.WriteRequest()
        for i in range(first, first + count):
            upd = req.updates.add()
            upd.type = p4r.Update.MODIFY
            m = upd.entity.meter_entry
            m.meter_id = meter_id
            m.index.index = i
            m.config.cir, m.config.cburst = rate, burst
            m.config.pir, m.config.pburst = rate, burst
        self._send(req)

    def read_meter_rate(self, name: str, index: int) -> tuple[int, int]:
        """(rate, burst) of one meter cell (peak), (0, 0) when unset."""
        req = p4r.ReadRequest()
        m = req.entities.add().meter_entry
        m.meter_id = self.schema.meters[name].preamble.id
        m.index.index = index
        for e in self._read(req):
            return int(e.meter_entry.config.pir), int(e.meter_entry.config.pburst)
        return 0, 0

    def write_plan(self, batches: list[list[Update]]) -> int:
        for b in batches:
            self.write(b)
        return sum(len(b) for b in batches)

    # ------------------------------------------------------------ stream

    def enable_digest(
        self, name: str = "conn_digest_t", max_list_size: int = 1, max_timeout_ns: int = 0
    ) -> None:
        """Ask for digests: by default at once, one per list, so collision entries land
        fast; a busier digest (a tier's connection events) batches up to `max_list_size`
        within `max_timeout_ns`."""
        self._require_primary("configure digests")
        digest_id = self.schema.digest_id(name)
        for op in ("INSERT", "MODIFY"):
            req = p4r.WriteRequest()
            upd = req.updates.add()
            upd.type = p4r.Update.Type.Value(op)
            d = upd.entity.digest_entry
            d.digest_id = digest_id
            d.config.max_timeout_ns = max_timeout_ns
            d.config.max_list_size = max_list_size
            d.config.ack_timeout_ns = 1_000_000_000
            try:
                self._send(req)
                return
            except NotPrimaryError:
                raise
            except SwitchError:
                continue  # INSERT of an existing digest config: MODIFY it instead
        raise SwitchError(f"switch at {self.address} refused the digest configuration")

    def next_stream_message(self, kind: str, timeout: float) -> Any:
        """The next StreamMessageResponse of a kind ("digest", "idle_timeout_notification",
        ...), or None after `timeout` seconds."""
        if self._stream is None:
            raise SwitchError("a reader session has no stream")
        try:
            if timeout <= 0:
                return self._stream.inbox[kind].get_nowait()
            return self._stream.inbox[kind].get(timeout=timeout)
        except queue.Empty:
            return None

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        req = p4r.StreamMessageRequest()
        req.digest_ack.digest_id = digest_id
        req.digest_ack.list_id = list_id
        if self._stream is not None:
            self._stream.send(req)
