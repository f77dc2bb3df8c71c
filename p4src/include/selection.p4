/* Backend selection for a new connection, by the VIP's algorithm.
 * One more algorithm is one more branch here with its table. */
#ifndef P4LB_SELECTION_P4
#define P4LB_SELECTION_P4

control BackendSelection(inout headers_t hdr,
                         inout metadata_t meta,
                         inout standard_metadata_t std_meta) {
    // Next WRR slot per service; the only state this stage updates per connection.
    register<bit<16>>(MAX_SERVICES) rr_position;

    // IP hash: the 5-tuple's CRC16 modulo the pool (the paper's hash).
    action hash_member() {
        hash(meta.member_index, HashAlgorithm.crc16, (member_index_t)0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             (bit<32>)meta.pool_size);
    }

    // WRR: take the VIP's next slot and advance. The slot count may have shrunk since
    // the position was written.
    action next_slot() {
        bit<16> pos;
        rr_position.read(pos, (bit<32>)meta.service_id);
        pos = pos >= meta.slot_count ? 16w0 : pos;
        meta.member_index = pos;
        rr_position.write((bit<32>)meta.service_id,
                          pos + 1 == meta.slot_count ? 16w0 : pos + 1);
    }

    // Maglev: the 5-tuple's CRC32 (computed once, by the state lookup) modulo the table.
    action maglev_slot() {
        hash(meta.member_index, HashAlgorithm.identity, (member_index_t)0,
             { meta.flow_hash }, (bit<32>)meta.slot_count);
    }

    // Source hash: every connection from one address picks the same bucket.
    action source_slot() {
        hash(meta.member_index, HashAlgorithm.crc32, (member_index_t)0,
             { hdr.ipv4.src_addr }, (bit<32>)meta.slot_count);
    }

    @name(".set_member")
    action set_member(backend_id_t backend_id) {
        meta.backend_id = backend_id;
        meta.have_backend = 1;
    }

    // Matches (service, version, member index). Hit: that member's backend.
    // IP hash picks the index as hash(5-tuple) mod pool_size. The controller writes the
    // active backends of each VIP, in order, under the version it is about to flip to.
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
    // cycle of the weights, a weighted Maglev lookup table, or weighted source buckets.
    @name(".wrr_table")
    table wrr_table {
        key = {
            meta.service_id:   exact @name("service_id");
            meta.version:      exact @name("version");
            meta.member_index: exact @name("slot");
        }
        actions = { set_member; @defaultonly NoAction; }
        default_action = NoAction();
        size = SLOT_TABLE_SIZE;
    }

    apply {
        if (meta.algorithm == Algorithm.IPHASH) {
            if (meta.pool_size != 0) {
                hash_member();
                pool_table.apply();
            }
        } else if (meta.slot_count != 0) {
            if (meta.algorithm == Algorithm.WRR) {
                next_slot();
            } else if (meta.algorithm == Algorithm.MAGLEV) {
                maglev_slot();
            } else {
                source_slot();
            }
            wrr_table.apply();
        }
    }
}

#endif
