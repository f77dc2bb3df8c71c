/* Backend selection for a new connection, by the VIP's algorithm.
 * One more algorithm is one more SELECT_* mode with its table here. */
#ifndef P4LB_SELECTION_P4
#define P4LB_SELECTION_P4

control BackendSelection(inout headers_t hdr,
                         inout metadata_t meta,
                         inout standard_metadata_t std_meta) {
    // Next WRR slot per service; the only state this stage updates per packet.
    register<bit<16>>(MAX_SERVICES) rr_position;

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

    // Matches (service, version, slot). Hit: the backend of that WRR slot.
    // The controller fills slot_count slots with the smooth (interleaved) WRR sequence of
    // the current weights, so each cycle gives every backend exactly its weight.
    @name(".wrr_table")
    table wrr_table {
        key = {
            meta.service_id:   exact @name("service_id");
            meta.version:      exact @name("version");
            meta.member_index: exact @name("slot");
        }
        actions = { set_member; @defaultonly NoAction; }
        default_action = NoAction();
        size = WRR_TABLE_SIZE;
    }

    apply {
        if (meta.select_mode == SELECT_POOL && meta.pool_size != 0) {
            hash(meta.member_index, HashAlgorithm.crc16, (member_index_t)0,
                 { hdr.ipv4.src_addr, meta.vip_addr, hdr.ipv4.protocol,
                   meta.l4_src_port, meta.l4_dst_port },
                 meta.pool_size);
            pool_table.apply();
        } else if (meta.select_mode == SELECT_WRR && meta.slot_count != 0) {
            bit<16> pos;
            rr_position.read(pos, (bit<32>)meta.service_id);
            // The slot count may have shrunk since the position was written.
            if (pos >= meta.slot_count) {
                pos = 0;
            }
            meta.member_index = pos;
            bit<16> following = pos + 1;
            if (following == meta.slot_count) {
                following = 0;
            }
            rr_position.write((bit<32>)meta.service_id, following);
            wrr_table.apply();
        }
    }
}

#endif
