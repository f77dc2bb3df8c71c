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
    // slot of candidates): the flow's signature (the state lookup's hash xor the
    // client's port) modulo the size. One action, called in one place: p4c copies a
    // hash's input into a field of its own per call site.
    action flow_hash_slot() {
        hash(meta.member_index, HashAlgorithm.identity, (member_index_t)0,
             { meta.sig }, meta.size);
    }

    // Source hash: every connection from one address picks the same bucket. The base,
    // meta.index, is 0 for an IPv4 VIP (BMv2 zeroes metadata per packet, and nothing
    // before uses it); an IPv6 VIP's lookup has put its client's bucket there and set the
    // size to 1 (ipv6.p4's set_vip6). A field apart from the result: p4c copies a base
    // that is the result into a field of its own.
    action source_slot() {
        hash(meta.member_index, HashAlgorithm.crc32, meta.index,
             { hdr.ipv4.src_addr }, meta.size);
    }

    @name(".set_member")
    action set_member(backend_id_t backend_id) {
        meta.backend_id = backend_id;
    }

    // LEAST*: the slot's candidates, up to MAX_CANDIDATES (backend, weight) pairs; a pair
    // of weight 0 is an unused place. The controller fills every active backend of the VIP
    // when it asks for an exact choice ("all", rotated from slot to slot so a tie goes to
    // whichever backend the flow's hash puts first), or d of them drawn by weight (power of
    // d choices). The candidate with the lowest load over its weight, by the VIP's
    // algorithm's measure, wins; the earlier one wins a tie. One action for the three
    // algorithms: the candidates and weights stay action parameters, where a separate
    // action per algorithm would need them in metadata fields (each one more field BMv2
    // resets for every packet). The registers are read into metadata, not action locals,
    // for the same reason: window holds each candidate's cost in turn, best_cost and
    // best_weight the winner's so far.
    // LEASTPKT's count for the packet_window in window: the current window's count plus the
    // previous one's (a stale window counts what it still covers: its current count if it
    // was the previous window).
#define WINDOW_COUNT \
    ((bit<32>)PREVIOUS_COUNT(meta.window) * (bit<32>)COUNTED_NOW(meta.window) \
     + (bit<32>)CURRENT_COUNT(meta.window) \
       * (bit<32>)(bit<1>)(WINDOW_OF(meta.window) == WINDOW_ID \
                           || WINDOW_OF(meta.window) + 1 == WINDOW_ID) + 1)
    // LEASTCONN: active + 1, as Envoy compares (with active alone every idle backend ties at
    // 0 and the weights would not order them). LEASTTIME: (active + 1) x (mean response
    // time + 1 tick); a backend not yet timed counts one tick. LEASTPKT: packets in the
    // last one to two windows. The candidate wins when cost / weight is below the best's,
    // compared in integers: cost x best_weight < best_cost x weight.
#define CONSIDER(backend, weight) \
    if (weight != 0) { \
        if (meta.algorithm == Algorithm.LEASTPKT) { \
            packet_window.read(meta.window, backend); \
            meta.window = (bit<64>)WINDOW_COUNT; \
        } else { \
            active_conns.read(meta.load, backend); \
            meta.window = (bit<64>)meta.load + 1; \
            if (meta.algorithm == Algorithm.LEASTTIME) { \
                response_time.read(meta.load, backend); \
                meta.window = meta.window * (bit<64>)(meta.load + RT_SCALE); \
            } \
        } \
        if (meta.best_weight == 0 \
            || meta.window * (bit<64>)meta.best_weight < meta.best_cost * (bit<64>)weight) { \
            meta.backend_id = backend; \
            meta.best_cost = meta.window; \
            meta.best_weight = weight; \
        } \
    }
    @name(".set_candidates")
    action set_candidates(
                          backend_id_t candidate_0, bit<16> weight_0,
                          backend_id_t candidate_1, bit<16> weight_1,
                          backend_id_t candidate_2, bit<16> weight_2,
                          backend_id_t candidate_3, bit<16> weight_3,
                          backend_id_t candidate_4, bit<16> weight_4,
                          backend_id_t candidate_5, bit<16> weight_5,
                          backend_id_t candidate_6, bit<16> weight_6,
                          backend_id_t candidate_7, bit<16> weight_7,
                          backend_id_t candidate_8, bit<16> weight_8,
                          backend_id_t candidate_9, bit<16> weight_9,
                          backend_id_t candidate_10, bit<16> weight_10,
                          backend_id_t candidate_11, bit<16> weight_11,
                          backend_id_t candidate_12, bit<16> weight_12,
                          backend_id_t candidate_13, bit<16> weight_13,
                          backend_id_t candidate_14, bit<16> weight_14,
                          backend_id_t candidate_15, bit<16> weight_15) {
        meta.best_weight = 0;
        CONSIDER(candidate_0, weight_0)
        CONSIDER(candidate_1, weight_1)
        CONSIDER(candidate_2, weight_2)
        CONSIDER(candidate_3, weight_3)
        CONSIDER(candidate_4, weight_4)
        CONSIDER(candidate_5, weight_5)
        CONSIDER(candidate_6, weight_6)
        CONSIDER(candidate_7, weight_7)
        CONSIDER(candidate_8, weight_8)
        CONSIDER(candidate_9, weight_9)
        CONSIDER(candidate_10, weight_10)
        CONSIDER(candidate_11, weight_11)
        CONSIDER(candidate_12, weight_12)
        CONSIDER(candidate_13, weight_13)
        CONSIDER(candidate_14, weight_14)
        CONSIDER(candidate_15, weight_15)
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
    // (LEAST*) candidates: all active backends, or d drawn from weighted buckets.
    @name(".slot_table")
    table slot_table {
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
                // IP hash, Maglev, and the candidates of the LEAST* algorithms.
                flow_hash_slot();
            }
            if (meta.algorithm == Algorithm.IPHASH) {
                pool_table.apply();
            } else {
                slot_table.apply();
            }
        }
    }
}

#endif
