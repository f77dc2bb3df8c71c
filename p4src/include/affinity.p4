/* Connection affinity: every packet of a connection goes to the backend chosen for its
 * first packet, whatever happens to weights, pools or the VIP's algorithm meanwhile.
 *
 * State lives in 4-way buckets: one 256-bit register entry holds four 64-bit slots, so a
 * packet reads its bucket once and writes it back once. A slot holds a 30-bit signature
 * of the flow (told apart from the bucket index: 17 bits of the same CRC32, plus a CRC16),
 * the tick of its last packet, its state and its backend. A slot is free when its state
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

// Hash the 5-tuple once, read the flow's bucket, find the way holding its signature;
// the VIP lookup's own action (set_vip) runs this for every packet to a VIP. refresh()
// writes the bucket back with that slot refreshed (or freed by RST); a flow not in the
// bucket leaves it unchanged, and new_connection() stores it once its backend is chosen.
// Every value is one flat expression into metadata: p4c turns nested conditionals into
// extra primitives, and BMv2 pays for each primitive. A macro, not an action: calling an
// action with the headers and metadata copies them whole, in and out.
#define CONN_LOOKUP() \
    hash(meta.flow_hash, HashAlgorithm.crc32, 32w0, \
         { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol, \
           meta.l4_src_port, meta.l4_dst_port }, \
         64w0x100000000); \
    meta.bucket_index = (bit<32>)meta.flow_hash[16:0]; \
    meta.sig = meta.flow_hash[31:17] ++ meta.l4_src_port; \
    conn_state.read(meta.bucket, meta.bucket_index); \
    meta.now = std_meta.ingress_global_timestamp[30:10]; \
    /* A signature is in at most one way (a flow is always stored where it was). */ \
    meta.hit_ways = (bit<1>)(meta.bucket[255:225] == meta.sig) \
                 ++ (bit<1>)(meta.bucket[191:161] == meta.sig) \
                 ++ (bit<1>)(meta.bucket[127:97] == meta.sig) \
                 ++ (bit<1>)(meta.bucket[63:33] == meta.sig)

control ConnectionState(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t std_meta) {

    // Indexed by service id: new flows whose bucket was full. Such a flow still gets its
    // algorithm's choice; the controller pins it with a conn_table entry.
    @name(".collisions")
    counter(MAX_SERVICES, CounterType.packets) collisions;
    // Indexed by backend id: connections each backend was chosen for (new flows); TCP
    // connections that completed the handshake (the client's first ACK), and those of
    // them that ended with the client's FIN or an RST. Established minus closed is what a
    // drain waits for (less idle connections, which age out of the state silently). Index
    // 0 (no backend) collects the packets that are neither.
    @name(".backend_conns")
    counter(MAX_BACKENDS, CounterType.packets) backend_conns;
    @name(".backend_established")
    counter(MAX_BACKENDS, CounterType.packets) backend_established;
    @name(".backend_closes")
    counter(MAX_BACKENDS, CounterType.packets) backend_closes;

    BackendSelection() selection;

    // The flow's slot (locate), whether it is live and this connection's, and what the
    // packet does to it (refresh). Three actions, not one: within an action p4c
    // substitutes each computed value into every later use, so a value many later ones
    // read (hit_ways, slot) is better computed in an action of its own.
    action locate() {
        meta.hit_shift = ((bit<8>)(meta.hit_ways[1:1] | meta.hit_ways[3:3]) << 6)
                       | ((bit<8>)(meta.hit_ways[2:2] | meta.hit_ways[3:3]) << 7);
        meta.slot = (conn_slot_t)(meta.bucket >> meta.hit_shift);
    }

    action refresh() {
        // Known: the way is live, and this is not a SYN for a slot past its handshake
        // (that is a new connection reusing the 5-tuple; a SYN for a half-open slot is a
        // retransmission and keeps its backend).
        meta.known = (bit<1>)(meta.hit_ways != 0 && SLOT_LIVE(meta.slot, meta.now)
            && !((meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN
                 && meta.slot[11:10] != CONN_EMBRYONIC));
        // The client's first ACK establishes a half-open slot (01 -> 10: xor 11), FIN
        // closes (| 11), RST frees (& 00). No nested conditionals: p4c would split them.
        meta.next_state = ((meta.slot[11:10]
                            ^ (conn_state_t)(bit<1>)(meta.slot[11:10] == CONN_EMBRYONIC
                                                     && (meta.tcp_flags & TCP_FLAG_SYN) == 0) * 3)
                           | (conn_state_t)(bit<1>)((meta.tcp_flags & TCP_FLAG_FIN) != 0) * 3)
                          & (conn_state_t)(bit<1>)((meta.tcp_flags & TCP_FLAG_RST) == 0) * 3;
        conn_state.write(meta.bucket_index, meta.known == 0 ? meta.bucket
            : (meta.bucket & ~(((conn_bucket_t)SLOT_MASK) << meta.hit_shift))
              | (((conn_bucket_t)(meta.sig ++ EXPIRY(meta.next_state, meta.now)
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
        backend_conns.count((bit<32>)meta.backend_id);
        meta.slot_shift = meta.hit_ways != 0 ? meta.hit_shift
            : (!SLOT_LIVE(meta.bucket[63:0], meta.now) ? 8w0
            : (!SLOT_LIVE(meta.bucket[127:64], meta.now) ? 8w64
            : (!SLOT_LIVE(meta.bucket[191:128], meta.now) ? 8w128
            : (!SLOT_LIVE(meta.bucket[255:192], meta.now) ? 8w192 : NO_WAY))));
        meta.collision = (bit<1>)(meta.slot_shift == NO_WAY);
        meta.next_state = hdr.tcp.isValid() ? CONN_EMBRYONIC : CONN_ESTABLISHED;
        conn_state.write(meta.bucket_index, meta.slot_shift == NO_WAY ? meta.bucket
            : (meta.bucket & ~(((conn_bucket_t)SLOT_MASK) << meta.slot_shift))
              | (((conn_bucket_t)(meta.sig ++ EXPIRY(meta.next_state, meta.now)
                                  ++ meta.next_state ++ meta.backend_id[9:0]))
                 << meta.slot_shift));
    }

    action count_event() {
        backend_established.count((bit<32>)meta.backend_id * (bit<32>)meta.conn_event[0:0]);
        backend_closes.count((bit<32>)meta.backend_id * (bit<32>)meta.conn_event[1:1]);
    }

    action report_collision() {
        collisions.count((bit<32>)meta.service_id);
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
        locate();
        refresh();
        if (meta.known == 1) {
            if (meta.conn_event != CONN_EVENT_NONE) {
                count_event();
            }
        } else if (!vip_source_table.apply().hit && !conn_table.apply().hit) {
            // A flow the state does not know: choose by the VIP's algorithm if it starts
            // here (a SYN, or any UDP packet); the hashes recompute its first packet's
            // choice (Maglev's even across most pool changes); round robin cannot, and
            // drops it rather than guess.
            bool starts = (meta.tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN
                          || !hdr.tcp.isValid();
            if (starts || meta.algorithm != Algorithm.WRR) {
                selection.apply(hdr, meta, std_meta);
                if (meta.have_backend == 0) {
                    meta.drop_reason = DropReason.NO_BACKEND;
                } else if (starts) {
                    new_connection();
                    if (meta.collision == 1) {
                        report_collision();
                    }
                }
            } else {
                meta.drop_reason = DropReason.NO_STATE;
            }
        }
    }
}

#endif
