"""An in-process P4Runtime server that behaves like BMv2's where the controller depends on
it, so the unit layer drives the controller over real gRPC on any machine.

It implements Write, Read, SetForwardingPipelineConfig, GetForwardingPipelineConfig and
StreamChannel: arbitration by election id (the highest is primary and everyone is told
when that changes; a second stream with an election id in use is refused), writes only
from the primary, and every table entry checked against the P4Info it was given (unknown
table/field/action, missing or extra fields and params, values wider than their field,
non-canonical bytes, don't-care LPM sent as /0 -> INVALID_ARGUMENT; INSERT of an existing
key -> ALREADY_EXISTS; MODIFY/DELETE of a missing one -> NOT_FOUND; a full table ->
RESOURCE_EXHAUSTED). A batch continues past errors, and the per-update p4.Error list
comes back in grpc-status-details-bin, as BMv2 does. Tests push digests and idle-timeout
notifications to the primary, set counters, and wait for what the fake was asked (writes,
arbitrations, counter reads) with `wait_for`."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import any_pb2

OK, UNKNOWN, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS = 0, 2, 3, 5, 6
RESOURCE_EXHAUSTED, UNIMPLEMENTED = 8, 12
_STATUS = {c.value[0]: c for c in grpc.StatusCode}


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(eq=False)
class _Client:
    election_id: int = -1  # -1: no arbitration yet
    out: queue.Queue[p4r.StreamMessageResponse | tuple[grpc.StatusCode, str] | None] = field(
        default_factory=queue.Queue
    )
    active: bool = True


def _u128(v: p4r.Uint128) -> int:
    return (v.high << 64) | v.low


def _canonical(value: bytes, bitwidth: int, what: str) -> int:
    if not value:
        raise _Refused(INVALID_ARGUMENT, f"{what}: empty value")
    if len(value) > 1 and value[0] == 0:
        raise _Refused(INVALID_ARGUMENT, f"{what}: bytes are not canonical (leading zero)")
    number = int.from_bytes(value, "big")
    if number >= 1 << bitwidth:
        raise _Refused(INVALID_ARGUMENT, f"{what}: {number} does not fit in {bitwidth} bits")
    return number


class FakeSwitch(p4r_grpc.P4RuntimeServicer):
    """Start with `start()`, stop with `stop()`; `address` is 127.0.0.1:<free port>."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.cond = threading.Condition()
        self.clients: list[_Client] = []
        self.primary: _Client | None = None
        self.arbitrations = 0  # arbitration requests seen (refused ones included)
        self.write_requests = 0
        self.updates_applied = 0
        self.acks: list[tuple[int, int]] = []
        # (election id of the writer, table name, update type) of every table write applied
        self.table_writes: list[tuple[int, str, int]] = []
        self.full_tables: set[str] = set()  # tests: tables that refuse every INSERT as full
        self.denied: list[int] = []  # election ids of writes refused: not the primary
        self.counter_reads: dict[str, int] = {}  # counter name -> reads of it answered
        self._list_ids = itertools.count(1)
        self._wipe()
        self._server: grpc.Server | None = None
        self.port = 0

    # ------------------------------------------------------------ lifecycle

    def start(self, port: int = 0, credentials: grpc.ServerCredentials | None = None) -> FakeSwitch:
        """Serve on 127.0.0.1 (`credentials`: over TLS, as BMv2's --grpc-server-ssl)."""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        p4r_grpc.add_P4RuntimeServicer_to_server(self, self._server)
        if credentials is None:
            self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        else:
            self.port = self._server.add_secure_port(f"127.0.0.1:{port}", credentials)
        self._server.start()
        return self

    def stop(self) -> None:
        self._end_streams()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def restart(self) -> None:
        """As a switch process restarting: every stream ends, the pipeline and all state go."""
        self._end_streams()
        with self.cond:
            self._wipe()

    def _end_streams(self) -> None:
        with self.cond:
            for c in self.clients:
                c.active = False
                c.out.put((grpc.StatusCode.UNAVAILABLE, "switch restarted"))
            self.clients = []
            self.primary = None
            self.cond.notify_all()

    def _wipe(self) -> None:
        self.p4info: p4i.P4Info | None = None
        self.device_config = b""
        self.tables: dict[int, dict[bytes, p4r.TableEntry]] = {}
        self.groups: dict[int, p4r.MulticastGroupEntry] = {}
        self.counters: dict[int, dict[int, tuple[int, int]]] = {}
        self.direct_counts: dict[bytes, tuple[int, int]] = {}  # by table entry key
        self.digest_configs: dict[int, p4r.DigestEntry.Config] = {}

    def wait_for(self, check: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Wait (bounded) until `check()` holds; it is re-evaluated on every state change."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    # ------------------------------------------------------------ P4Info lookups

    def _table(self, table_id: int) -> p4i.Table:
        assert self.p4info is not None
        for t in self.p4info.tables:
            if t.preamble.id == table_id:
                return t
        raise _Refused(INVALID_ARGUMENT, f"unknown table id {table_id}")

    def _by_name(self, kind: str, name: str) -> Any:
        assert self.p4info is not None
        for x in getattr(self.p4info, kind):
            if x.preamble.name.rsplit(".", 1)[-1] == name:
                return x
        raise KeyError(name)

    def table_id(self, name: str) -> int:
        return int(self._by_name("tables", name).preamble.id)

    # ------------------------------------------------------------ test hooks

    def entries(self, table: str) -> list[p4r.TableEntry]:
        with self.cond:
            return list(self.tables.get(self.table_id(table), {}).values())

    def all_entries(self) -> list[p4r.TableEntry]:
        """Every table entry held (for comparing with an intent without an RPC)."""
        with self.cond:
            return [te for held in self.tables.values() for te in held.values()]

    def set_counter(self, name: str, index: int, packets: int, nbytes: int = 0) -> None:
        with self.cond:
            cid = self._by_name("counters", name).preamble.id
            self.counters.setdefault(cid, {})[index] = (packets, nbytes)

    def set_direct_counter(
        self, table: str, pick: Callable[[p4r.TableEntry], bool], packets: int, nbytes: int = 0
    ) -> int:
        """Set the direct counter of the entries of `table` that `pick` selects; how many."""
        with self.cond:
            tid = self.table_id(table)
            keys = [k for k, te in self.tables.get(tid, {}).items() if pick(te)]
            for k in keys:
                self.direct_counts[k] = (packets, nbytes)
            return len(keys)

    def send_digest(
        self, name: str, members: list[dict[str, int]], election_id: int | None = None
    ) -> int | None:
        """Push one DigestList to the primary (or to the client of `election_id`: one sent
        just before mastership moved), if digests are configured; its list id."""
        with self.cond:
            assert self.p4info is not None
            digest = self._by_name("digests", name)
            to = self.primary
            if election_id is not None:
                to = next((c for c in self.clients if c.election_id == election_id), None)
            if digest.preamble.id not in self.digest_configs or to is None:
                return None
            struct = self.p4info.type_info.structs[digest.type_spec.struct.name]
            rep = p4r.StreamMessageResponse()
            rep.digest.digest_id = digest.preamble.id
            rep.digest.list_id = next(self._list_ids)
            for values in members:
                data = rep.digest.data.add()
                for m in struct.members:
                    v = values[m.name]
                    data.struct.members.add().bitstring = v.to_bytes(
                        max(1, (v.bit_length() + 7) // 8), "big"
                    )
            to.out.put(rep)
            return int(rep.digest.list_id)

    def expire(self, table: str, election_id: int | None = None) -> int:
        """Report every entry of `table` idle to the primary (or to the client of
        `election_id`), as the switch's ageing would; how many."""
        with self.cond:
            held = self.entries(table)
            to = self.primary
            if election_id is not None:
                to = next((c for c in self.clients if c.election_id == election_id), None)
            if not held or to is None:
                return 0
            rep = p4r.StreamMessageResponse()
            for te in held:
                rep.idle_timeout_notification.table_entry.add().CopyFrom(te)
            to.out.put(rep)
            return len(held)

    # ------------------------------------------------------------ arbitration

    def _elect(self) -> None:
        """Recompute the primary; tell every client when it changed."""
        live = [c for c in self.clients if c.active and c.election_id > 0]
        best = max(live, key=lambda c: c.election_id, default=None)
        if best is not self.primary:
            self.primary = best
            for c in live:
                self._answer(c)
        self.cond.notify_all()

    def _answer(self, c: _Client) -> None:
        rep = p4r.StreamMessageResponse()
        a = rep.arbitration
        a.device_id = self.device_id
        if self.primary is not None:
            a.election_id.high = self.primary.election_id >> 64
            a.election_id.low = self.primary.election_id & (2**64 - 1)
        a.status.code = OK if c is self.primary else ALREADY_EXISTS
        c.out.put(rep)

    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        client = _Client()
        with self.cond:
            self.clients.append(client)

        def leave() -> None:
            with self.cond:
                client.active = False
                if client in self.clients:
                    self.clients.remove(client)
                self._elect()
            client.out.put(None)

        def consume() -> None:
            try:
                for req in request_iterator:
                    self._stream_request(client, req)
            except grpc.RpcError:
                pass
            finally:
                leave()

        context.add_callback(leave)
        threading.Thread(target=consume, daemon=True).start()
        while True:
            item = client.out.get()
            if item is None:
                return
            if isinstance(item, tuple):
                leave()
                context.abort(*item)
            yield item

    def _stream_request(self, client: _Client, req: p4r.StreamMessageRequest) -> None:
        kind = req.WhichOneof("update")
        with self.cond:
            if kind == "arbitration":
                self.arbitrations += 1
                eid = _u128(req.arbitration.election_id)
                if req.arbitration.device_id != self.device_id:
                    client.out.put((grpc.StatusCode.NOT_FOUND, "unknown device id"))
                elif any(c is not client and c.election_id == eid for c in self.clients):
                    client.out.put(
                        (grpc.StatusCode.INVALID_ARGUMENT, f"election id {eid} is in use")
                    )
                else:
                    was = self.primary
                    client.election_id = eid
                    self._elect()
                    if self.primary is was:  # not told by _elect: answer the newcomer
                        self._answer(client)
            elif kind == "digest_ack":
                self.acks.append((req.digest_ack.digest_id, req.digest_ack.list_id))
            self.cond.notify_all()

    # ------------------------------------------------------------ pipeline

    def _check_primary(self, election_id: p4r.Uint128, context: grpc.ServicerContext) -> None:
        if self.primary is None or _u128(election_id) != self.primary.election_id:
            self.denied.append(_u128(election_id))
            self.cond.notify_all()
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the primary controller")

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        with self.cond:
            self._check_primary(request.election_id, context)
            if not request.config.p4_device_config:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no device config")
            self._wipe()
            self.p4info = p4i.P4Info()
            self.p4info.CopyFrom(request.config.p4info)
            self.device_config = request.config.p4_device_config
            self.cond.notify_all()
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        with self.cond:
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline")
            rep = p4r.GetForwardingPipelineConfigResponse()
            rep.config.p4info.CopyFrom(self.p4info)
            return rep

    # ------------------------------------------------------------ writes

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        with self.cond:
            if request.device_id != self.device_id:
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown device id")
            self._check_primary(request.election_id, context)
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline")
            self.write_requests += 1
            errors = []
            for u in request.updates:
                try:
                    self._update(u)
                    self.updates_applied += 1
                    if u.entity.HasField("table_entry"):
                        name = self._table(u.entity.table_entry.table_id).preamble.name
                        self.table_writes.append(
                            (_u128(request.election_id), name.rsplit(".", 1)[-1], u.type)
                        )
                    errors.append(p4r.Error(canonical_code=OK))
                except _Refused as e:
                    errors.append(p4r.Error(canonical_code=e.code, message=e.message))
            self.cond.notify_all()
        if any(e.canonical_code != OK for e in errors):
            status = rpc_status.Status(code=UNKNOWN, message="write failed")
            for e in errors:
                packed = any_pb2.Any()
                packed.Pack(e)
                status.details.append(packed)
            details = status.SerializeToString()
            context.set_trailing_metadata((("grpc-status-details-bin", details),))
            context.abort(grpc.StatusCode.UNKNOWN, "write failed")
        return p4r.WriteResponse()

    def _update(self, u: p4r.Update) -> None:
        op = u.type
        if op == p4r.Update.UNSPECIFIED:
            raise _Refused(INVALID_ARGUMENT, "update type unspecified")
        kind = u.entity.WhichOneof("entity")
        if kind == "table_entry":
            self._table_update(op, u.entity.table_entry)
        elif kind == "packet_replication_engine_entry":
            g = u.entity.packet_replication_engine_entry.multicast_group_entry
            self._keyed(self.groups, g.multicast_group_id, op, g, "multicast group")
        elif kind == "digest_entry":
            d = u.entity.digest_entry
            assert self.p4info is not None
            if d.digest_id not in {x.preamble.id for x in self.p4info.digests}:
                raise _Refused(INVALID_ARGUMENT, f"unknown digest id {d.digest_id}")
            self._keyed(self.digest_configs, d.digest_id, op, d.config, "digest config")
        else:
            raise _Refused(UNIMPLEMENTED, f"{kind} writes are not supported")

    @staticmethod
    def _keyed(store: dict[Any, Any], key: Any, op: int, value: Any, what: str) -> None:
        if op == p4r.Update.INSERT:
            if key in store:
                raise _Refused(ALREADY_EXISTS, f"{what} {key!r} exists")
            store[key] = type(value)()
            store[key].CopyFrom(value)
        elif key not in store:
            raise _Refused(NOT_FOUND, f"{what} {key!r} does not exist")
        elif op == p4r.Update.MODIFY:
            store[key].CopyFrom(value)
        else:
            del store[key]

    def _table_update(self, op: int, te: p4r.TableEntry) -> None:
        table = self._table(te.table_id)
        key = self._key(table, te)
        held = self.tables.setdefault(table.preamble.id, {})
        if op != p4r.Update.DELETE:
            self._check_action(table, te)
            if te.idle_timeout_ns and table.idle_timeout_behavior != p4i.Table.NOTIFY_CONTROL:
                raise _Refused(INVALID_ARGUMENT, "table does not support idle timeouts")
        full = table.preamble.name.rsplit(".", 1)[-1] in self.full_tables
        if op == p4r.Update.INSERT and key not in held and (full or len(held) >= table.size):
            raise _Refused(RESOURCE_EXHAUSTED, f"table {table.preamble.name} is full")
        self._keyed(held, key, op, te, f"entry in {table.preamble.name}")

    def _key(self, table: p4i.Table, te: p4r.TableEntry) -> bytes:
        fields = {f.id: f for f in table.match_fields}
        seen = set()
        for m in te.match:
            f = fields.get(m.field_id)
            if f is None:
                raise _Refused(INVALID_ARGUMENT, f"unknown match field id {m.field_id}")
            if m.field_id in seen:
                raise _Refused(INVALID_ARGUMENT, f"match field {f.name} given twice")
            seen.add(m.field_id)
            kind = m.WhichOneof("field_match_type")
            if f.match_type == p4i.MatchField.EXACT and kind == "exact":
                _canonical(m.exact.value, f.bitwidth, f.name)
            elif f.match_type == p4i.MatchField.LPM and kind == "lpm":
                plen = m.lpm.prefix_len
                if not 0 < plen <= f.bitwidth:
                    raise _Refused(INVALID_ARGUMENT, f"{f.name}: prefix length {plen}")
                value = _canonical(m.lpm.value, f.bitwidth, f.name)
                if value & ((1 << (f.bitwidth - plen)) - 1):
                    raise _Refused(INVALID_ARGUMENT, f"{f.name}: bits beyond the prefix are set")
            else:
                raise _Refused(INVALID_ARGUMENT, f"{f.name}: wrong match kind {kind}")
        for f in table.match_fields:
            if f.match_type == p4i.MatchField.EXACT and f.id not in seen:
                raise _Refused(INVALID_ARGUMENT, f"exact match field {f.name} missing")
        key = p4r.TableEntry(table_id=te.table_id, priority=te.priority)
        key.match.extend(sorted(te.match, key=lambda m: m.field_id))
        return key.SerializeToString(deterministic=True)

    def _check_action(self, table: p4i.Table, te: p4r.TableEntry) -> None:
        assert self.p4info is not None
        if te.action.WhichOneof("type") != "action":
            raise _Refused(INVALID_ARGUMENT, "entry has no direct action")
        act = te.action.action
        refs = {r.id: r for r in table.action_refs}
        if act.action_id not in refs or refs[act.action_id].scope == p4i.ActionRef.DEFAULT_ONLY:
            raise _Refused(INVALID_ARGUMENT, f"action id {act.action_id} not allowed here")
        action = next(a for a in self.p4info.actions if a.preamble.id == act.action_id)
        params = {p.id: p for p in action.params}
        given = set()
        for p in act.params:
            spec = params.get(p.param_id)
            if spec is None or p.param_id in given:
                raise _Refused(INVALID_ARGUMENT, f"bad parameter id {p.param_id}")
            given.add(p.param_id)
            _canonical(p.value, spec.bitwidth, f"{action.preamble.name}.{spec.name}")
        if given != set(params):
            raise _Refused(INVALID_ARGUMENT, f"{action.preamble.name}: parameters missing")

    # ------------------------------------------------------------ reads

    def Read(
        self, request: p4r.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4r.ReadResponse]:
        rep = p4r.ReadResponse()
        with self.cond:
            if self.p4info is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline")
            try:
                for ent in request.entities:
                    self._read_entity(ent, rep)
            except _Refused as e:
                context.abort(_STATUS[e.code], e.message)
            self.cond.notify_all()  # a test may wait for a read (`counter_reads`)
        yield rep

    def _read_entity(self, ent: p4r.Entity, rep: p4r.ReadResponse) -> None:
        assert self.p4info is not None
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            tid = ent.table_entry.table_id
            ids = [t.preamble.id for t in self.p4info.tables] if tid == 0 else [tid]
            for i in ids:
                self._table(i)
                for te in self.tables.get(i, {}).values():
                    rep.entities.add().table_entry.CopyFrom(te)
        elif kind == "counter_entry":
            want = ent.counter_entry
            for c in self.p4info.counters:
                if want.counter_id not in (0, c.preamble.id):
                    continue
                name = c.preamble.name.rsplit(".", 1)[-1]
                self.counter_reads[name] = self.counter_reads.get(name, 0) + 1
                cells = self.counters.get(c.preamble.id, {})
                indexes = [want.index.index] if want.HasField("index") else range(c.size)
                for i in indexes:
                    out = rep.entities.add().counter_entry
                    out.counter_id = c.preamble.id
                    out.index.index = i
                    packets, nbytes = cells.get(i, (0, 0))
                    out.data.packet_count, out.data.byte_count = packets, nbytes
        elif kind == "direct_counter_entry":
            tid = ent.direct_counter_entry.table_entry.table_id
            table = self._table(tid)
            if not any(d.direct_table_id == tid for d in self.p4info.direct_counters):
                raise _Refused(INVALID_ARGUMENT, f"{table.preamble.name} has no direct counter")
            for k, te in self.tables.get(tid, {}).items():
                d = rep.entities.add().direct_counter_entry
                d.table_entry.table_id = te.table_id  # as BMv2: the match, not the action
                d.table_entry.match.extend(te.match)
                packets, nbytes = self.direct_counts.get(k, (0, 0))
                d.data.packet_count, d.data.byte_count = packets, nbytes
        elif kind == "packet_replication_engine_entry":
            gid = ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
            for k, g in sorted(self.groups.items()):
                if gid in (0, k):
                    out_g = rep.entities.add().packet_replication_engine_entry
                    out_g.multicast_group_entry.CopyFrom(g)
        elif kind == "digest_entry":
            for k, cfg in self.digest_configs.items():
                d = rep.entities.add().digest_entry
                d.digest_id = k
                d.config.CopyFrom(cfg)
        else:
            raise _Refused(UNIMPLEMENTED, f"{kind} reads are not supported")
