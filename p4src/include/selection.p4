/* Backend selection for a new connection, by the VIP's algorithm.
 * One more algorithm is one more branch here with its table. */
#ifndef P4LB_SELECTION_P4
#define P4LB_SELECTION_P4

control BackendSelection(inout headers_t hdr,
                         inout metadata_t meta,
                         inout standard_metadata_t std_meta) {
    // Next WRR slot per service; the only state this stage updates per connection.
    // 32 bits: it is read into and written from meta.index (no field of its own).
    register<bit<32>>(MAX_SERVICES) rr_position;

    // WRR: take the VIP's next slot and advance. The slot count may have shrunk since
    // the position was written.
    action next_slot() {
        rr_position.read(meta.index, meta.service_id);
        if (meta.index >= meta.size) {
            meta.index = 0;
        }
        meta.member_index = (member_index_t)meta.index;
        meta.index = meta.index + 1;
        if (meta.index == meta.size) {
            meta.index = 0;
        }
        rr_position.write(meta.service_id, meta.index);
    }

    // IP hash (a pool member), Maglev (a lookup table slot) and the LEAST* algorithms (a
    // slot of candidate pairs): the flow's signature (the state lookup's hash xor the
    // client's port) modulo the size. One action, called in one place: p4c copies a
    // hash's input into a field of its own per call site.
    action flow_hash_slot() {
        hash(meta.member_index, HashAlgorithm.identity, (member_index_t)0,
             { meta.sig }, meta.size);
    }

    // Source hash: every connection from one address picks the same bucket.
    action source_slot() {
        hash(meta.member_index, HashAlgorithm.crc32, (member_index_t)0,
             { hdr.ipv4.src_addr }, meta.size);
    }

    @name(".set_member")
    action set_member(backend_id_t backend_id) {
        meta.backend_id = backend_id;
    }

    // LEAST*: the slot's two candidates and their weights. The first is taken unless the
    // second's load over its weight, by the VIP's algorithm's measure, is below the
    // first's (the first wins a tie). One action for the three algorithms: the candidates
    // and weights stay action parameters, where a separate action per algorithm would
    // need them in metadata fields (each one more field BMv2 resets for every packet).
    // The registers are read into metadata, not action locals, for the same reason.
    // Whether load2 / second_weight < load1 / first_weight, in integers:
#define SECOND_LIGHTER(load1, load2) \
    ((bit<64>)(load2) * (bit<64>)first_weight < (bit<64>)(load1) * (bit<64>)second_weight)
    // LEASTPKT's count for the packet_window in window: the current window's count plus the
    // previous one's (a stale window counts what it still covers: its current count if it
    // was the previous window).
#define WINDOW_COUNT \
    ((bit<32>)meta.window[47:24] * (bit<32>)(bit<1>)(meta.window[63:48] == WINDOW_ID) \
     + (bit<32>)meta.window[23:0] * (bit<32>)(bit<1>)(meta.window[63:48] == WINDOW_ID \
                                            || meta.window[63:48] + 1 == WINDOW_ID) + 1)
    @name(".set_candidates")
    action set_candidates(backend_id_t first, bit<16> first_weight,
                          backend_id_t second, bit<16> second_weight) {
        meta.backend_id = first;
        if (meta.algorithm == Algorithm.LEASTCONN) {
            // (active + 1) / weight, as Envoy compares (with active alone every idle
            // backend ties at 0 and the weights would not order them).
            active_conns.read(meta.load, first);
            active_conns.read(meta.load2, second);
            if (SECOND_LIGHTER(meta.load + 1, meta.load2 + 1)) {
                meta.backend_id = second;
            }
        } else if (meta.algorithm == Algorithm.LEASTTIME) {
            // (active + 1) x (mean response time + 1 tick) / weight; a backend not yet
            // timed counts one tick. The first's cost is kept in window.
            active_conns.read(meta.load, first);
            response_time.read(meta.load2, first);
            meta.window = (bit<64>)(meta.load + 1) * (bit<64>)(meta.load2 + RT_SCALE);
            active_conns.read(meta.load, second);
            response_time.read(meta.load2, second);
            if (SECOND_LIGHTER(meta.window,
                               (bit<64>)(meta.load + 1) * (bit<64>)(meta.load2 + RT_SCALE))) {
                meta.backend_id = second;
            }
        } else {
            // LEASTPKT: packets in the last one to two windows; each candidate's window
            // is read into window in turn, its count kept in load / load2.
            packet_window.read(meta.window, first);
            meta.load = WINDOW_COUNT;
            packet_window.read(meta.window, second);
            meta.load2 = WINDOW_COUNT;
            if (SECOND_LIGHTER(meta.load, meta.load2)) {
                meta.backend_id = second;
            }
        }
    }

    // Matches (service, version, member index). Hit: that member's backend.
    // IP hash picks the index as the flow's signature mod the pool's size. The controller
    // writes each VIP's active backends, in order, under the version it is about to flip to.
    @name(".pool_table")
    table pool_table {
        key = {
            meta.service_id:   exact @name("service_id");
            meta.version:      exact @name("version");
            meta.member_index: exact @name("index");
        }
        actions = { set_member; @defaultonly NoAction; }
        default_action = NoAction();
        size = POOL_TABLE_SIZE;
    }

    // Matches (service, version, slot). Hit: the backend of that slot. The controller
    // fills slot_count slots per VIP for its algorithm: the smooth (interleaved) WRR
    // cycle of the weights, a weighted Maglev lookup table, weighted source buckets, or
    // (LEAST*) pairs of candidates drawn from weighted buckets.
    @name(".wrr_table")
    table wrr_table {
        key = {
            meta.service_id:   exact @name("service_id");
            meta.version:      exact @name("version");
            meta.member_index: exact @name("slot");
        }
        actions = { set_member; set_candidates; @defaultonly NoAction; }
        default_action = NoAction();
        size = SLOT_TABLE_SIZE;
    }

    apply {
        // An empty pool or slot table (size 0) has no backend to give.
        if (meta.size != 0) {
            if (meta.algorithm == Algorithm.WRR) {
                next_slot();
            } else if (meta.algorithm == Algorithm.SRCHASH) {
                source_slot();
            } else {
                // IP hash, Maglev, and the two candidates of the LEAST* algorithms.
                flow_hash_slot();
            }
            if (meta.algorithm == Algorithm.IPHASH) {
                pool_table.apply();
            } else {
                wrr_table.apply();
            }
        }
    }
}

#endif
