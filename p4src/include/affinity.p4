/* Connection affinity: every packet of a connection goes to the backend chosen for its
 * first packet, whatever happens to weights, pools or the VIP's algorithm meanwhile.
 *
 * State lives in 4-way buckets: one 256-bit register entry holds four 64-bit slots, so a
 * packet reads its bucket once and writes it back once. A slot holds a 30-bit signature
 * of the flow (CRC32 bits the bucket index does not use, and the source port), whether a
 * request awaits its answer, when it expires, its state and its backend. A slot is free when its state
 * is CONN_FREE or it has aged out; how long a slot lives depends on its state, so
 * half-open connections (a SYN flood) free their slots within seconds. */
#ifndef P4LB_AFFINITY_P4
#define P4LB_AFFINITY_P4

const conn_slot_t SLOT_MASK = 0xffffffffffffffff;
const bit<8> NO_WAY = 255;  // a slot shift meaning "no way of the bucket"

// Macros, not functions: p4c inlines a function call as statements, and a call inside a
// condition or a ternary then becomes several predicated primitives in BMv2.
// A slot holds a live flow: not free, and its expiry not yet passed.
#define SLOT_LIVE(slot, now) \
    ((slot)[11:10] != CONN_FREE && (slot)[32:12] - (now) <= CONN_IDLE_TICKS)
// When a slot in `state` expires, from now.
#define EXPIRY(state, now) \
    ((now) + CONN_IDLE_TICKS \
     - (tick_t)(bit<1>)((state) == CONN_EMBRYONIC) * (CONN_IDLE_TICKS - CONN_EMBRYONIC_TICKS) \
     - (tick_t)(bit<1>)((state) == CONN_CLOSING) * (CONN_IDLE_TICKS - CONN_CLOSING_TICKS))

// One entry per bucket. Global, so that the VIP lookup's action can read the bucket:
// every step folded into an action the packet runs anyway is one table less in BMv2.
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

// Hash a flow's 5-tuple (as the client sends it) once, read its bucket, find the way
// holding its signature and take its slot. The VIP lookup's action (set_vip) runs this for
// every packet to a VIP, the reply path for a backend's FIN, RST or answer. Every value is
// one flat expression into metadata: p4c turns nested conditionals into extra primitives,
// and BMv2 pays for each primitive. A macro, not an action: calling an action with the
// headers and metadata copies them whole, in and out. A signature is in at most one way
// (a flow is always stored where it was), so the way's shift is a sum.
#define CONN_LOOKUP(client, vip, client_port, vip_port) \
    hash(meta.flow_hash, HashAlgorithm.crc32, 32w0, \
         { client, vip, hdr.ipv4.protocol, client_port, vip_port }, \
         64w0x100000000); \
    meta.bucket_index = (bit<32>)meta.flow_hash[16:0]; \
    meta.sig = meta.flow_hash[31:18] ++ (client_port); \
    conn_state.read(meta.bucket, meta.bucket_index); \
    meta.now = std_meta.ingress_global_timestamp[30:10]; \
    meta.hit = (bit<1>)(meta.bucket[63:34] == meta.sig || meta.bucket[127:98] == meta.sig \
                        || meta.bucket[191:162] == meta.sig || meta.bucket[255:226] == meta.sig); \
    meta.hit_shift = (bit<8>)(bit<1>)(meta.bucket[127:98] == meta.sig) * 64 \
                   + (bit<8>)(bit<1>)(meta.bucket[191:162] == meta.sig) * 128 \
                   + (bit<8>)(bit<1>)(meta.bucket[255:226] == meta.sig) * 192; \
    meta.slot = (conn_slot_t)(meta.bucket >> meta.hit_shift)

control ConnectionState(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t std_meta) {

    // Indexed by service id: new flows whose bucket was full. Such a flow still gets its
    // algorithm's choice; the controller pins it with a conn_table entry.
    @name(".collisions")
    counter(MAX_SERVICES, CounterType.packets) collisions;
    BackendSelection() selection;

    action refresh() {
        // Known: the way is live, and this is not a SYN for a slot past its handshake
        // (that is a new connection reusing the 5-tuple; a SYN for a half-open slot is a
        // retransmission and keeps its backend).
        meta.known = (bit<1>)(meta.hit == 1 && SLOT_LIVE(meta.slot, meta.now)
            && !((meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN
                 && meta.slot[11:10] != CONN_EMBRYONIC));
        // The client's first ACK establishes a half-open slot (01 -> 10: xor 11), FIN
        // closes (| 11), RST frees (& 00). No nested conditionals: p4c would split them.
        meta.next_state = ((meta.slot[11:10]
                            ^ (conn_state_t)(bit<1>)(meta.slot[11:10] == CONN_EMBRYONIC
                                                     && (meta.tcp_flags & TCP_FLAG_SYN) == 0) * 3)
                           | (conn_state_t)(bit<1>)((meta.tcp_flags & TCP_FLAG_FIN) != 0) * 3)
                          & (conn_state_t)(bit<1>)((meta.tcp_flags & TCP_FLAG_RST) == 0) * 3;
        // Data from the client: a request, until the backend pushes its answer.
        meta.awaiting = meta.slot[33:33]
            | (bit<1>)(hdr.tcp.isValid() && meta.l4_len != ((bit<16>)hdr.tcp.data_offset) << 2);
        conn_state.write(meta.bucket_index, meta.known == 0 ? meta.bucket
            : (meta.bucket & ~(((conn_bucket_t)SLOT_MASK) << meta.hit_shift))
              | (((conn_bucket_t)(meta.sig ++ meta.awaiting ++ EXPIRY(meta.next_state, meta.now)
                                  ++ meta.next_state ++ meta.slot[9:0]))
                 << meta.hit_shift));
        // The handshake completes, or an established connection ends.
        meta.conn_event = (bit<1>)(meta.known == 1 && meta.slot[11:10] == CONN_ESTABLISHED
                                   && meta.next_state != CONN_ESTABLISHED)
                       ++ (bit<1>)(meta.known == 1 && meta.slot[11:10] == CONN_EMBRYONIC
                                   && meta.next_state == CONN_ESTABLISHED);
        meta.backend_id = (backend_id_t)meta.slot[9:0];
        meta.have_backend = meta.known;
    }

    // The backend is chosen for a flow that starts here: count the connection and store
    // the flow in its old way (the 5-tuple reused) or the first way not live. A full
    // bucket leaves it to conn_table: a collision, reported to the controller.
    action new_connection() {
        backend_conns.count(meta.backend_id);
        meta.slot_shift = meta.hit == 1 ? meta.hit_shift
            : (!SLOT_LIVE(meta.bucket[63:0], meta.now) ? 8w0
            : (!SLOT_LIVE(meta.bucket[127:64], meta.now) ? 8w64
            : (!SLOT_LIVE(meta.bucket[191:128], meta.now) ? 8w128
            : (!SLOT_LIVE(meta.bucket[255:192], meta.now) ? 8w192 : NO_WAY))));
        meta.collision = (bit<1>)(meta.slot_shift == NO_WAY);
        meta.next_state = hdr.tcp.isValid() ? CONN_EMBRYONIC : CONN_ESTABLISHED;
        conn_state.write(meta.bucket_index, meta.slot_shift == NO_WAY ? meta.bucket
            : (meta.bucket & ~(((conn_bucket_t)SLOT_MASK) << meta.slot_shift))
              | (((conn_bucket_t)(meta.sig ++ 1w0 ++ EXPIRY(meta.next_state, meta.now)
                                  ++ meta.next_state ++ meta.backend_id[9:0]))
                 << meta.slot_shift));
    }

    // The way a new connection took held an established connection that never closed
    // (aged out: its FIN was lost; or its 5-tuple is reused): that one ends now.
    action reclaim() {
        meta.slot = (conn_slot_t)(meta.bucket >> meta.slot_shift);
        meta.conn_event = (bit<1>)(meta.slot[11:10] == CONN_ESTABLISHED) ++ 1w0;
        backend_closes.count((bit<32>)meta.slot[9:0] * (bit<32>)meta.conn_event[1:1]);
        ADD_ACTIVE((bit<32>)meta.slot[9:0] * (bit<32>)meta.conn_event[1:1], 0, 1);
    }

    action count_event() {
        backend_established.count(meta.backend_id * (bit<32>)meta.conn_event[0:0]);
        backend_closes.count(meta.backend_id * (bit<32>)meta.conn_event[1:1]);
        ADD_ACTIVE(meta.backend_id, meta.conn_event[0:0], meta.conn_event[1:1]);
    }

    // LEASTPKT: one more packet to this connection's backend in the current window (a
    // window later than the stored one starts over; the one after it keeps the stored
    // count as the previous window's).
    action count_packet() {
        packet_window.read(meta.window, meta.backend_id);
        meta.window_id = (bit<16>)(meta.now >> PKT_WINDOW_BITS);
        packet_window.write(meta.backend_id, meta.window_id
            ++ (meta.window[47:24] * (bit<24>)(bit<1>)(meta.window[63:48] == meta.window_id)
                + meta.window[23:0] * (bit<24>)(bit<1>)(meta.window[63:48] + 1 == meta.window_id))
            ++ (meta.window[23:0] * (bit<24>)(bit<1>)(meta.window[63:48] == meta.window_id) + 1));
    }

    action report_collision() {
        collisions.count(meta.service_id);
        digest<conn_digest_t>((bit<32>)1,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
              meta.l4_src_port, meta.l4_dst_port, meta.backend_id });
    }

    @name(".use_backend")
    action use_backend(backend_id_t backend_id) {
        meta.backend_id = backend_id;
        meta.have_backend = 1;
    }

    // Matches a flow's 5-tuple (as the client sent it, to the VIP). Hit: the backend the
    // controller recorded for a flow whose bucket was full. Consulted only when the
    // buckets do not know the flow. Written by the controller from digests; aged out by
    // idle timeout.
    @name(".conn_table")
    table conn_table {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.ipv4.protocol: exact @name("protocol");
            meta.l4_src_port:  exact @name("src_port");
            meta.l4_dst_port:  exact @name("dst_port");
        }
        actions = { use_backend; @defaultonly NoAction; }
        default_action = NoAction();
        size = CONN_TABLE_SIZE;
        support_timeout = true;
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

    apply {
        refresh();
        if (meta.known == 1) {
            if (meta.conn_event != CONN_EVENT_NONE) {
                count_event();
            }
            if (meta.algorithm == Algorithm.LEASTPKT) {
                count_packet();
            }
        } else if (!vip_source_table.apply().hit && !conn_table.apply().hit) {
            // A flow the state does not know: choose by the VIP's algorithm if it starts
            // here (a SYN, or any UDP packet); the hashes recompute its first packet's
            // choice (Maglev's even across most pool changes); round robin and the
            // load-driven algorithms cannot, and drop it rather than guess.
            bool starts = (meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN
                          || !hdr.tcp.isValid();
            if (starts || meta.algorithm == Algorithm.IPHASH
                    || meta.algorithm == Algorithm.MAGLEV || meta.algorithm == Algorithm.SRCHASH) {
                selection.apply(hdr, meta, std_meta);
                if (meta.have_backend == 0) {
                    meta.drop_reason = DropReason.NO_BACKEND;
                } else if (starts) {
                    new_connection();
                    if (meta.collision == 1) {
                        report_collision();
                    } else {
                        reclaim();
                    }
                }
            } else {
                meta.drop_reason = DropReason.NO_STATE;
            }
        }
    }
}

// A backend's FIN, RST or (when its VIP balances on response time) pushed segment, on its
// way back to the client: the connection's slot learns that the backend closed (the
// client may never send its own FIN), and a pushed segment answering an awaited request
// gives the backend's response time. Called after reverse NAT: the source is the VIP.
control ReplyState(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t std_meta) {
    action reply_lookup() {
        CONN_LOOKUP(hdr.ipv4.dst_addr, hdr.ipv4.src_addr, meta.l4_dst_port, hdr.tcp.src_port);
    }

    // A live slot: FIN or RST closes it (an established connection ends: the close
    // event), a push answers the awaited request (the sample); other slots stay as they are.
    action update() {
        meta.known = (bit<1>)(meta.hit == 1 && SLOT_LIVE(meta.slot, meta.now));
        meta.next_state = meta.slot[11:10]
            | (conn_state_t)(bit<1>)((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0) * 3;
        meta.conn_event = (bit<1>)(meta.known == 1 && meta.slot[11:10] == CONN_ESTABLISHED
                                   && meta.next_state == CONN_CLOSING) ++ 1w0;
        meta.sampled = (bit<1>)(meta.known == 1 && meta.slot[33:33] == 1
                                && meta.slot[11:10] == CONN_ESTABLISHED
                                && (meta.tcp_flags & TCP_FLAG_PSH) != 0);
        // A closing slot expires CONN_CLOSING_TICKS from now; otherwise its expiry stays.
        conn_state.write(meta.bucket_index, meta.known == 0 ? meta.bucket
            : (meta.bucket & ~(((conn_bucket_t)SLOT_MASK) << meta.hit_shift))
              | (((conn_bucket_t)(meta.sig
                                  ++ (meta.slot[33:33] & (bit<1>)((meta.tcp_flags & TCP_FLAG_PSH) == 0))
                                  ++ (meta.next_state == meta.slot[11:10] ? meta.slot[32:12]
                                      : meta.now + CONN_CLOSING_TICKS)
                                  ++ meta.next_state ++ meta.slot[9:0]))
                 << meta.hit_shift));
    }

    // The close, counted once for the backend; the response time: the time since the
    // client's last packet (its expiry less the idle timeout), folded into the average.
    action count() {
        backend_closes.count((bit<32>)meta.slot[9:0] * (bit<32>)meta.conn_event[1:1]);
        ADD_ACTIVE((bit<32>)meta.slot[9:0] * (bit<32>)meta.conn_event[1:1], 0, 1);
        response_time.read(meta.load, (bit<32>)meta.slot[9:0] * (bit<32>)meta.sampled);
        response_time.write((bit<32>)meta.slot[9:0] * (bit<32>)meta.sampled,
            meta.load - (meta.load >> 3)
            + ((bit<32>)(meta.now - (meta.slot[32:12] - CONN_IDLE_TICKS)) * RT_SCALE >> 3));
    }

    apply {
        reply_lookup();
        update();
        if (meta.conn_event != CONN_EVENT_NONE || meta.sampled == 1) {
            count();
        }
    }
}

#endif
