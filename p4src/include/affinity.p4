/* Connection affinity: every packet of a connection goes to the backend chosen for its
 * first packet, whatever happens to weights, pools or the VIP's algorithm meanwhile.
 *
 * State lives in buckets of CONN_WAYS slots (size.p4): one register entry holds a bucket,
 * so a packet reads its bucket once and writes it back at most once. A slot holds a
 * signature of the flow (its hash xor its client port), whether a request awaits its
 * answer, when it expires, its state, port and backend (defines.p4). A slot is free when
 * its state is CONN_FREE or it has aged out; how long it lives depends on its state, so
 * half-open connections (a SYN flood) free their slots within seconds. */
#ifndef P4LB_AFFINITY_P4
#define P4LB_AFFINITY_P4

// Where each field of a slot starts (conn_slot_t in defines.p4; the widths: size.p4).
const bit<32> SLOT_SIG_AT      = 0;
const bit<32> SLOT_AWAITING_AT = SLOT_SIG_AT + SLOT_SIG_BITS;
const bit<32> SLOT_EXPIRY_AT   = SLOT_AWAITING_AT + SLOT_AWAITING_BITS;
const bit<32> SLOT_STATE_AT    = SLOT_EXPIRY_AT + SLOT_EXPIRY_BITS;
const bit<32> SLOT_PORT_AT     = SLOT_STATE_AT + SLOT_STATE_BITS;
const bit<32> SLOT_BACKEND_AT  = SLOT_PORT_AT + SLOT_PORT_BITS;

// A slot's fields.
#define SLOT_FIELD(s, at, bits) (s)[(at) + (bits) - 1:(at)]
#define SLOT_BACKEND(s)  SLOT_FIELD(s, SLOT_BACKEND_AT, SLOT_BACKEND_BITS)
#define SLOT_PORT(s)     SLOT_FIELD(s, SLOT_PORT_AT, SLOT_PORT_BITS)
#define SLOT_STATE(s)    SLOT_FIELD(s, SLOT_STATE_AT, SLOT_STATE_BITS)
#define SLOT_EXPIRY(s)   SLOT_FIELD(s, SLOT_EXPIRY_AT, SLOT_EXPIRY_BITS)
#define SLOT_AWAITING(s) SLOT_FIELD(s, SLOT_AWAITING_AT, SLOT_AWAITING_BITS)
#define SLOT_SIG(s)      SLOT_FIELD(s, SLOT_SIG_AT, SLOT_SIG_BITS)

// Way `w` of a bucket (0 at the bottom): its slot, its slot's signature, and the shift
// that brings its slot to the bottom (hit_shift's value for it).
#define WAY(bucket, w)     SLOT_FIELD(bucket, (w) * CONN_SLOT_BITS, CONN_SLOT_BITS)
#define WAY_SIG(bucket, w) SLOT_FIELD(bucket, (w) * CONN_SLOT_BITS + SLOT_SIG_AT, SLOT_SIG_BITS)
#define WAY_SHIFT(w)       ((bit<8>)((w) * CONN_SLOT_BITS))
const bit<8> NO_WAY = 255;  // a shift meaning "no way of the bucket"

// A whole slot's bits, and what a packet of a known connection may change in it: state ++
// expiry ++ awaiting, the bits from SLOT_AWAITING_AT up to the port.
const conn_slot_t SLOT_MASK = ~(conn_slot_t)0;
const conn_bucket_t SLOT_CHANGE_MASK =
    ((conn_bucket_t)1 << SLOT_PORT_AT) - ((conn_bucket_t)1 << SLOT_AWAITING_AT);

// Macros, not functions: p4c inlines a function call as statements, and a call inside a
// condition or a ternary then becomes several predicated primitives in BMv2.
// A slot holds a live flow: not free, and its expiry not yet passed.
#define SLOT_LIVE(slot, now) \
    (SLOT_STATE(slot) != CONN_FREE && SLOT_EXPIRY(slot) - (now) <= CONN_IDLE_TICKS)
// When a slot in `state` expires, from now.
#define EXPIRY(state, now) \
    ((now) + CONN_IDLE_TICKS \
     - (tick_t)(bit<1>)((state) == CONN_EMBRYONIC) * (CONN_IDLE_TICKS - CONN_EMBRYONIC_TICKS) \
     - (tick_t)(bit<1>)((state) == CONN_CLOSING) * (CONN_IDLE_TICKS - CONN_CLOSING_TICKS))
// The bucket with the slot at `shift` replaced by `slot`.
#define WITH_SLOT(bucket, shift, slot) \
    (((bucket) & ~(((conn_bucket_t)SLOT_MASK) << (shift))) | (((conn_bucket_t)(slot)) << (shift)))

// One entry per bucket. Only the ingress (one thread in BMv2) reads and writes it: the
// VIP lookup, new connections and a backend's FIN, RST or answer; so a write never
// loses another. The egress only counts.
register<conn_bucket_t>(CONN_BUCKETS) conn_state;

// The connection counters the controller reads (stats, drain), indexed by backend id:
// connections each backend was chosen for (new flows); TCP connections that completed
// the handshake; and those of them that ended, by whichever of the ways above. Established
// minus closes is active_conns. Index 0 collects the packets that are neither.
@name(".backend_conns")
counter(MAX_BACKENDS, CounterType.packets) backend_conns;
@name(".backend_established")
counter(MAX_BACKENDS, CounterType.packets) backend_established;
@name(".backend_closes")
counter(MAX_BACKENDS, CounterType.packets) backend_closes;

// Hash a client's flow once, read its bucket, find the way holding its signature and
// take its slot. The hash is the CRC32 of the client's address and port plus the VIP's
// service id: the VIP stands for the rest of the 5-tuple (its address, protocol and
// port), so flows to different VIPs land apart, and 6 bytes to hash instead of 13 cost
// fewer operations. Its low bits are the bucket; it xor the client's port is the
// signature (two flows of a VIP with one client port cannot share a CRC32: their
// addresses differ within 32 bits, which CRC32 always tells apart).
// A signature is in at most one way (a flow is always stored where it was), so the
// first way holding it is the one: a flow in way 0, the commonest, costs one
// comparison and no shift. If-statements, not conditional expressions: BMv2 jumps over
// what a packet does not need, and p4c turns a conditional expression into several
// primitives. One comparison per way, unrolled for CONN_WAYS = 4. A macro, not an
// action: calling an action with the headers and metadata copies them whole, in and out.
// hit_shift starts at 0: BMv2 zeroes metadata per packet.
// The hash's input is one concatenation: p4c's BMv2 back end copies each component of
// a hash's input into a field of its own, whatever it is, so a list would cost 2 copies
// (and 2 fields) per call site. The hash is written into sig, then made the signature.
#define CONN_LOOKUP(client, client_port, service_id) \
    hash(meta.sig, HashAlgorithm.crc32, service_id, { client ++ client_port }, \
         64w0x100000000); \
    meta.bucket_index = meta.sig & (CONN_BUCKETS - 1); \
    meta.sig = meta.sig ^ (bit<32>)(client_port); \
    conn_state.read(meta.bucket, meta.bucket_index); \
    if ((flow_sig_t)meta.bucket == meta.sig) { \
        meta.slot = (conn_slot_t)meta.bucket; \
    } else { \
        if (WAY_SIG(meta.bucket, 1) == meta.sig) { meta.hit_shift = WAY_SHIFT(1); } \
        else if (WAY_SIG(meta.bucket, 2) == meta.sig) { meta.hit_shift = WAY_SHIFT(2); } \
        else if (WAY_SIG(meta.bucket, 3) == meta.sig) { meta.hit_shift = WAY_SHIFT(3); } \
        meta.slot = (conn_slot_t)(meta.bucket >> meta.hit_shift); \
    }

// Whether the slot CONN_LOOKUP took holds the flow: when no way does, the shift is 0 and
// way 0 holds another flow's signature (or none).
#define CONN_HIT ((flow_sig_t)meta.slot == meta.sig)

// The flow's slot, written back with next_state, `expiry` and `awaiting` (the rest of
// it, signature, port and backend, stays): the three fields in slot order, from
// SLOT_AWAITING_AT.
#define CONN_STORE(awaiting, expiry) \
    meta.bucket = (meta.bucket & ~(SLOT_CHANGE_MASK << meta.hit_shift)) \
        | (((conn_bucket_t)(meta.next_state ++ (expiry) ++ (awaiting)) << (bit<8>)SLOT_AWAITING_AT) \
           << meta.hit_shift); \
    conn_state.write(meta.bucket_index, meta.bucket)

// A shared VIP's connection opened or ended here: the tier's controller copies its backend
// to the other balancers, or removes the copies (`type`: metadata.p4's conn_opened_t and
// the others, one per call). The backend id is the packet's; its 5-tuple as the client
// sent it, to the VIP.
#define CONN_EVENT(type, event) \
    digest<type>((bit<32>)1, \
        { (event) ++ hdr.ipv4.src_addr ++ hdr.ipv4.dst_addr ++ hdr.ipv4.protocol \
          ++ hdr.l4.src_port ++ hdr.l4.dst_port ++ meta.backend_id })

// The same for an IPv6 connection (`type`: metadata.p4's conn6_opened_t and the others):
// conn6_digest_t's layout after the event, the port it leaves by last (what ipv6.p4's
// conn6_table copy holds beside the backend).
#define CONN6_EVENT(type, event) \
    digest<type>((bit<32>)1, \
        { (event) ++ hdr.ipv6.src_addr ++ hdr.ipv6.dst_addr ++ hdr.ipv6.next_hdr \
          ++ hdr.l4.src_port ++ hdr.l4.dst_port ++ meta.backend_id ++ std_meta.egress_spec })

// The client sent data (a request the backend has yet to answer).
#define CLIENT_DATA (hdr.tcp.isValid() && meta.l4_len != ((bit<16>)hdr.tcp.data_offset) << 2)

// A client's packet to a VIP, right after CONN_LOOKUP (the VIP lookup's action): if the
// flow is known, its slot takes the packet's effect on the connection and the packet
// leaves by the slot's switch port for the slot's backend. Nothing else runs in the
// ingress for a known flow; what the packet did to the connection is counted in the
// egress (CONNECTION_EVENTS).
// Known: the way is live, and this is not a SYN for a slot past its handshake (that is a
// new connection reusing the 5-tuple; a SYN for a half-open slot is a retransmission and
// keeps its backend).
// Next state: RST frees the slot; FIN closes it (and a closing slot stays closing); the
// client's first ACK establishes a half-open slot. Each writes the slot with its state's
// expiry. When the packet establishes or ends the connection, flow_status says so: the
// egress counts it without comparing states again. If-statements, one per transition: a
// packet evaluates only the conditions before its own, where one expression for all
// transitions costs every packet all of its operations. On a shared VIP (`shared`, the
// VIP entry's) the client's RST or FIN tells the tier's controller the connection ended,
// whether or not the backend's FIN came first (a retransmitted FIN says it again): only
// those packets pay for it, in one place for both (the parser drops a FIN or RST with a
// SYN, so neither takes the SYN's branch; each digest call costs a PHV field). `closed`:
// that report, its family's (CONN_EVENT or CONN6_EVENT).
// Awaiting: data from the client is a request, until the backend pushes its answer.
// The commonest packet, an established connection's packet without SYN, FIN or RST,
// changes nothing but the expiry: it writes the slot only when the stored expiry is over
// CONN_REFRESH_TICKS old (an established connection's idle timeout counts from its last
// packet, give or take that much). On a LEASTTIME VIP a data packet always writes it:
// the response time counts from the request's last packet, the stored expiry less the
// idle timeout.
#define CONN_REFRESH(shared, closed) \
    if (CONN_HIT && SLOT_LIVE(meta.slot, NOW)) { \
        meta.flow_status = FLOW_KNOWN; \
        meta.backend_id = (backend_id_t)SLOT_BACKEND(meta.slot); \
        std_meta.egress_spec = SLOT_PORT(meta.slot); \
        meta.next_state = SLOT_STATE(meta.slot); \
        if ((meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_FIN | TCP_FLAG_RST)) != 0 \
                || meta.next_state != CONN_ESTABLISHED) { \
            if ((shared) == 1 && (meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0) { \
                closed; \
            } \
            if ((meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN \
                    && meta.next_state != CONN_EMBRYONIC) { \
                meta.flow_status = FLOW_UNKNOWN; \
                meta.backend_id = 0; \
            } else if ((meta.tcp_flags & TCP_FLAG_RST) != 0) { \
                if (meta.next_state == CONN_ESTABLISHED) { meta.flow_status = FLOW_KNOWN_TURNS; } \
                meta.next_state = CONN_FREE; \
                CONN_STORE(1w0, NOW); \
            } else if ((meta.tcp_flags & TCP_FLAG_FIN) != 0 || meta.next_state == CONN_CLOSING) { \
                if (meta.next_state == CONN_ESTABLISHED) { meta.flow_status = FLOW_KNOWN_TURNS; } \
                meta.next_state = CONN_CLOSING; \
                CONN_STORE(SLOT_AWAITING(meta.slot) | (bit<1>)CLIENT_DATA, \
                           NOW + CONN_CLOSING_TICKS); \
            } else if (meta.next_state == CONN_EMBRYONIC && (meta.tcp_flags & TCP_FLAG_SYN) == 0) { \
                meta.flow_status = FLOW_KNOWN_TURNS; \
                meta.next_state = CONN_ESTABLISHED; \
                CONN_STORE(SLOT_AWAITING(meta.slot) | (bit<1>)CLIENT_DATA, \
                           NOW + CONN_IDLE_TICKS); \
            } else { \
                /* Anything else (a retransmitted SYN): the state stays. */ \
                CONN_STORE(SLOT_AWAITING(meta.slot) | (bit<1>)CLIENT_DATA, \
                           EXPIRY(meta.next_state, NOW)); \
            } \
        } else if (SLOT_EXPIRY(meta.slot) - NOW < CONN_IDLE_TICKS - CONN_REFRESH_TICKS) { \
            CONN_STORE(SLOT_AWAITING(meta.slot) | (bit<1>)CLIENT_DATA, \
                       NOW + CONN_IDLE_TICKS); \
        } else if (meta.algorithm == Algorithm.LEASTTIME) { \
            if (CLIENT_DATA) { \
                CONN_STORE(1w1, NOW + CONN_IDLE_TICKS); \
            } \
        } \
    }

// A client's packet to a VIP whose flow the state does not know (the VIP lookup found no
// live slot for it): choose its backend and port, and store a new connection.
control ConnectionState(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t std_meta) {

    // Indexed by service id: new flows whose bucket was full. Such a flow still gets its
    // algorithm's choice; the controller pins it with a conn_table entry.
    @name(".collisions")
    counter(MAX_SERVICES, CounterType.packets) collisions;
    BackendSelection() selection;

    // The backend is chosen for a flow that starts here: count the connection and store
    // the flow in its old way (the 5-tuple reused) or the first way not live. A full
    // bucket leaves it to conn_table: a collision, reported to the controller.
    // Statements, not conditional expressions: p4c gives each conditional expression a
    // PHV field of its own (one more field BMv2 resets for every packet).
    // The way taken replaces hit_shift (NO_WAY: the bucket is full).
    // The way it took held an established connection that never closed (aged out: its
    // FIN was lost; or its 5-tuple is reused): that one ends now, counted. All in one
    // action: each action after it would be a table of its own in BMv2, and each choice
    // between them a condition, far dearer than an `if` within an action.
    action new_connection() {
        backend_conns.count(meta.backend_id);
        if (!CONN_HIT) {
            meta.hit_shift = NO_WAY;
            if (!SLOT_LIVE(WAY(meta.bucket, 3), NOW)) { meta.hit_shift = WAY_SHIFT(3); }
            if (!SLOT_LIVE(WAY(meta.bucket, 2), NOW)) { meta.hit_shift = WAY_SHIFT(2); }
            if (!SLOT_LIVE(WAY(meta.bucket, 1), NOW)) { meta.hit_shift = WAY_SHIFT(1); }
            if (!SLOT_LIVE(WAY(meta.bucket, 0), NOW)) { meta.hit_shift = WAY_SHIFT(0); }
        }
        meta.next_state = CONN_ESTABLISHED;
        if (hdr.tcp.isValid()) { meta.next_state = CONN_EMBRYONIC; }
        if (meta.hit_shift != NO_WAY) {
            // The way's old slot, for reclaim.
            meta.slot = (conn_slot_t)(meta.bucket >> meta.hit_shift);
            meta.bucket = WITH_SLOT(meta.bucket, meta.hit_shift,
                                    meta.backend_id[SLOT_BACKEND_BITS - 1:0]
                                    ++ std_meta.egress_spec
                                    ++ meta.next_state ++ EXPIRY(meta.next_state, NOW)
                                    ++ 1w0 ++ meta.sig);
            conn_state.write(meta.bucket_index, meta.bucket);
            meta.index = 0;
            if (SLOT_STATE(meta.slot) == CONN_ESTABLISHED) {
                meta.index = (bit<32>)SLOT_BACKEND(meta.slot);
            }
            backend_closes.count(meta.index);
            ADD_ACTIVE(meta.index, 0, 1);
        } else {
            collisions.count(meta.service_id);
            // The flow's family decides which table pins it: conn_table (IPv4), or
            // ipv6.p4's conn6_table, which also takes the port it leaves by.
            if (hdr.ipv4.isValid()) {
                digest<conn_digest_t>((bit<32>)1,
                    { hdr.ipv4.src_addr ++ hdr.ipv4.dst_addr ++ hdr.ipv4.protocol
                      ++ hdr.l4.src_port ++ hdr.l4.dst_port ++ meta.backend_id });
            } else {
                digest<conn6_digest_t>((bit<32>)1,
                    { hdr.ipv6.src_addr ++ hdr.ipv6.dst_addr ++ hdr.ipv6.next_hdr
                      ++ hdr.l4.src_port ++ hdr.l4.dst_port ++ meta.backend_id
                      ++ std_meta.egress_spec });
            }
        }
    }

    @name(".use_backend")
    action use_backend(backend_id_t backend_id) {
        meta.backend_id = backend_id;
    }

    // A shared VIP's connection another balancer opened (the tier's controller copied its
    // backend here): the client's FIN or RST reports its end, as at its first balancer.
    @name(".use_shared_backend")
    action use_shared_backend(backend_id_t backend_id) {
        meta.backend_id = backend_id;
        if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0) {
            CONN_EVENT(copy_closed_t, CONN_CLOSED);
        }
    }

    // Not when the bucket was full: the collision's digest tells the controller. Each
    // family's connection in its own digest (IPv6's carries the port as well).
    @name(".share_connection")
    action share_connection() {
        if (meta.hit_shift != NO_WAY) {
            if (hdr.ipv4.isValid()) {
                CONN_EVENT(conn_opened_t, CONN_OPENED);
            } else {
                CONN6_EVENT(conn6_opened_t, CONN_OPENED);
            }
        }
    }

    // Matches a service id. Hit: the VIP's connections are shared by a tier of balancers,
    // and this new one is reported (conn_opened_t). Consulted only when a connection
    // starts. The tier's controller writes one entry per VIP whose algorithm keeps state
    // (round robin and the load-driven ones: the hashes need none to agree).
    @name(".conn_share_table")
    table conn_share_table {
        key = { meta.service_id: exact @name("service_id"); }
        actions = { share_connection; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_SERVICES;
    }

    // Not pinned: the flow may start a connection here (a SYN, or any UDP packet).
    action not_pinned() {
        if ((meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN
                || !hdr.tcp.isValid()) {
            meta.flow_status = FLOW_STARTS;
        }
    }

    // Matches a flow's 5-tuple (as the client sent it, to the VIP). Hit: the backend the
    // controller recorded for a flow whose bucket was full, or (use_shared_backend) for a
    // shared VIP's connection another balancer of the tier opened. Consulted only when the
    // buckets do not know the flow. Written by the controller from digests; aged out by
    // idle timeout.
    @name(".conn_table")
    table conn_table {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.ipv4.protocol: exact @name("protocol");
            hdr.l4.src_port:   exact @name("src_port");
            hdr.l4.dst_port:   exact @name("dst_port");
        }
        actions = { use_backend; use_shared_backend; @defaultonly not_pinned; }
        const default_action = not_pinned();
        size = CONN_TABLE_SIZE;
        support_timeout = true;
    }

    // A shared VIP's connection that no state here knows, found by its cookie: the backend
    // id the client echoed (nat.p4's set_vip_source), one of the VIP's.
    @name(".use_cookie")
    action use_cookie(backend_id_t backend_id) {
        meta.backend_id = backend_id;
    }

    // Matches (service id, the cookie in a client's TSecr). Hit: a mid-connection packet
    // another balancer of the tier chose the backend for; it follows the cookie. Miss
    // (a cookie of no backend of this VIP): dropped, counted as NO_STATE. The tier's
    // controller writes one entry per backend of each VIP whose connections the balancers
    // share.
    @name(".cookie_table")
    table cookie_table {
        key = {
            meta.service_id:                     exact @name("service_id");
            hdr.tcp_ts.tsecr[COOKIE_BITS - 1:0]: exact @name("cookie");
        }
        actions = { use_cookie; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_BACKENDS;
    }

    @name(".vip_source")
    action vip_source() {
        meta.drop_reason = DropReason.MARTIAN_SOURCE;
    }

    // Matches a source address. Hit: a VIP's address as the source of a new flow to a
    // VIP, which no client sends. The controller writes one entry per VIP address.
    @name(".vip_source_table")
    table vip_source_table {
        key = { hdr.ipv4.src_addr: exact @name("addr"); }
        actions = { vip_source; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_SERVICES;
    }

    @name(".set_backend_port")
    action set_backend_port(port_id_t switch_port) {
        std_meta.egress_spec = switch_port;
    }

    action unknown_backend() {
        meta.backend_id = 0;
        meta.drop_reason = DropReason.NO_BACKEND;
    }

    // Matches a backend id. Hit: the switch port the backend is attached to. Only a flow
    // the state does not know looks it up: a known one leaves by its slot's port. The
    // controller writes one entry per backend, beside its backend_table entry, and keeps
    // it while the backend is drained.
    @name(".backend_port_table")
    table backend_port_table {
        key = { meta.backend_id: exact @name("backend_id"); }
        actions = { set_backend_port; @defaultonly unknown_backend; }
        const default_action = unknown_backend();
        size = MAX_BACKENDS;
    }

    apply {
        // A flow the state does not know: choose by the VIP's algorithm if it starts here
        // (a SYN, or any UDP packet); the hashes recompute its first packet's choice
        // (Maglev's even across most pool changes); round robin and the load-driven
        // algorithms cannot: a shared VIP's flow follows its cookie, others are dropped
        // rather than guessed. A flow pinned in conn_table takes its recorded backend.
        // (No `return`: p4c implements one with a flag, a field and more tables.)
        if (vip_source_table.apply().miss) {
            if (conn_table.apply().miss) {
                if (meta.flow_status == FLOW_STARTS || meta.algorithm == Algorithm.IPHASH
                        || meta.algorithm == Algorithm.MAGLEV
                        || meta.algorithm == Algorithm.SRCHASH) {
                    selection.apply(hdr, meta, std_meta);
                } else if (!hdr.tcp_ts.isValid()) {
                    meta.drop_reason = DropReason.NO_STATE;
                } else if (cookie_table.apply().miss) {
                    meta.drop_reason = DropReason.NO_STATE;
                }
            }
            // Backend id 0 is none: no pool member or slot matched, or the port is unknown.
            if (meta.backend_id != 0) {
                switch (backend_port_table.apply().action_run) {
                    set_backend_port: {
                        if (meta.flow_status == FLOW_STARTS) {
                            new_connection();
                            conn_share_table.apply();
                        }
                    }
                }
            } else if (meta.drop_reason == DropReason.NONE) {
                meta.drop_reason = DropReason.NO_BACKEND;
            }
        }
    }
}

// A known connection's packet in the egress: what it did to the connection (handshake
// done, connection ended) and, for LEASTPKT, the packet itself, counted for its backend.
// Done in the egress, not the ingress: BMv2 runs the egress in threads of its own. A
// macro in the NAT's actions (nat.p4's backend_table), not a control of its own: an `if`
// inside an action costs BMv2 far less than a condition between tables.
// The handshake completed (only a half-open slot becomes established), or an established
// connection ended (FIN or RST): the ingress found that this packet establishes or ends it.
// LEASTPKT: one more packet to this connection's backend in the current window (a window
// later than the stored one starts over; the one after it keeps the stored count as the
// previous window's).
#define CONNECTION_EVENTS() \
    if (meta.flow_status == FLOW_KNOWN_TURNS) { \
        if (meta.next_state == CONN_ESTABLISHED) { \
            backend_established.count(meta.backend_id); \
        } else { \
            backend_closes.count(meta.backend_id); \
        } \
        ADD_ACTIVE(meta.backend_id, (bit<1>)(meta.next_state == CONN_ESTABLISHED), \
                   (bit<1>)(SLOT_STATE(meta.slot) == CONN_ESTABLISHED)); \
    } \
    if (meta.algorithm == Algorithm.LEASTPKT && meta.flow_status >= FLOW_KNOWN) { \
        packet_window.read(meta.window, meta.backend_id); \
        meta.window = WINDOW_ID \
            ++ (PREVIOUS_COUNT(meta.window) * (bit<24>)COUNTED_NOW(meta.window) \
                + CURRENT_COUNT(meta.window) * (bit<24>)COUNTED_BEFORE(meta.window)) \
            ++ (CURRENT_COUNT(meta.window) * (bit<24>)COUNTED_NOW(meta.window) + 1); \
        packet_window.write(meta.backend_id, meta.window); \
    }

// A backend's FIN, RST or (when its VIP balances on response time) pushed segment, on its
// way back to the client: the connection's slot learns that the backend closed (the
// client may never send its own FIN), and a pushed segment answering an awaited request
// gives the backend's response time. Part of the reverse NAT's action (nat.p4), after
// the rewrite (the source is the VIP): a macro, so a reply costs no table or condition
// of its own.
// The connection is looked up as its client sent it, to the VIP `service_id` (the reverse
// NAT entry's). A live slot: FIN or RST closes it
// (an established connection ends: its close is counted once for its backend), a push
// answers the awaited request (the sample: the time since the request's last packet, the
// slot's expiry less the idle timeout, folded into the backend's average); the slot is
// written only if either happened. A closing slot expires CONN_CLOSING_TICKS from now;
// otherwise its expiry stays.
#define REPLY_SAMPLED \
    (SLOT_AWAITING(meta.slot) == 1 && SLOT_STATE(meta.slot) == CONN_ESTABLISHED \
     && (meta.tcp_flags & TCP_FLAG_PSH) != 0)

#define REPLY_STATE(client, service_id) \
    CONN_LOOKUP(client, hdr.l4.dst_port, service_id); \
    if (CONN_HIT && SLOT_LIVE(meta.slot, NOW)) { \
        meta.next_state = SLOT_STATE(meta.slot); \
        if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0) { \
            meta.next_state = CONN_CLOSING; \
        } \
        if (meta.next_state != SLOT_STATE(meta.slot)) { \
            CONN_STORE(SLOT_AWAITING(meta.slot) & (bit<1>)((meta.tcp_flags & TCP_FLAG_PSH) == 0), \
                       NOW + CONN_CLOSING_TICKS); \
        } else if (REPLY_SAMPLED) { \
            CONN_STORE(1w0, SLOT_EXPIRY(meta.slot)); \
        } \
        meta.index = (bit<32>)SLOT_BACKEND(meta.slot); \
        if (meta.next_state == CONN_CLOSING && SLOT_STATE(meta.slot) == CONN_ESTABLISHED) { \
            backend_closes.count(meta.index); \
            ADD_ACTIVE(meta.index, 0, 1); \
        } \
        if (REPLY_SAMPLED) { \
            response_time.read(meta.load, meta.index); \
            meta.load = meta.load - (meta.load >> 3) \
                + ((bit<32>)(NOW - (SLOT_EXPIRY(meta.slot) - CONN_IDLE_TICKS)) * RT_SCALE >> 3); \
            response_time.write(meta.index, meta.load); \
        } \
    }

#endif
