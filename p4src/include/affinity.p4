/* Connection affinity: every packet of a connection goes to the backend chosen for its
 * first packet, whatever happens to weights, pools or the VIP's algorithm meanwhile. */
#ifndef P4LB_AFFINITY_P4
#define P4LB_AFFINITY_P4

control ConnectionAffinity(inout headers_t hdr,
                           inout metadata_t meta,
                           inout standard_metadata_t std_meta) {
    // State the data plane keeps per connection, indexed by a hash of the 5-tuple.
    // conn_sig holds a second, independent signature of the flow (0 = empty) so that two
    // flows sharing an index are told apart instead of one being misrouted.
    register<bit<32>>(CONN_STATE_SIZE) conn_sig;
    register<bit<16>>(CONN_STATE_SIZE) conn_backend;   // backend id | CONN_CLOSING_FLAG
    register<bit<32>>(CONN_STATE_SIZE) conn_seen;      // last packet, in ticks

    BackendSelection() selection;

    @name(".use_backend")
    action use_backend(backend_id_t backend_id) {
        meta.backend_id = backend_id;
        meta.have_backend = 1;
        meta.conn_entry_hit = 1;
    }

    // Matches a flow's 5-tuple (as the client sent it, to the VIP). Hit: the backend the
    // controller recorded for a flow the registers could not hold (an index collision).
    // Written by the controller from digests; aged out by idle timeout. Takes precedence.
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

    apply {
        conn_table.apply();
        if (meta.conn_entry_hit == 0) {
            hash(meta.flow_index, HashAlgorithm.crc32, (bit<32>)0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                   meta.l4_src_port, meta.l4_dst_port },
                 CONN_STATE_SIZE);
            bit<16> sig_hi;
            bit<16> sig_lo;
            hash(sig_hi, HashAlgorithm.crc16, (bit<16>)0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                   meta.l4_src_port, meta.l4_dst_port },
                 (bit<32>)65536);
            hash(sig_lo, HashAlgorithm.crc32, (bit<16>)0,
                 { meta.l4_dst_port, meta.l4_src_port, hdr.ipv4.protocol,
                   hdr.ipv4.dst_addr, hdr.ipv4.src_addr },
                 (bit<32>)65536);
            meta.flow_sig = sig_hi ++ sig_lo;
            if (meta.flow_sig == 0) {
                meta.flow_sig = 1;
            }

            bit<32> stored_sig;
            bit<16> stored_backend;
            bit<32> seen;
            conn_sig.read(stored_sig, meta.flow_index);
            conn_backend.read(stored_backend, meta.flow_index);
            conn_seen.read(seen, meta.flow_index);
            bit<32> now = (bit<32>)(std_meta.ingress_global_timestamp >> 10);

            bool closing = (stored_backend & CONN_CLOSING_FLAG) != 0;
            bit<32> idle_limit = CONN_IDLE_TICKS;
            if (closing) {
                idle_limit = CONN_CLOSING_TICKS;
            }
            bool live = stored_sig != 0 && (now - seen) < idle_limit;
            bool same = stored_sig != 0 && stored_sig == meta.flow_sig;
            bool is_tcp = hdr.tcp.isValid();
            bool syn = is_tcp && (hdr.tcp.flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
            bool fin = is_tcp && (hdr.tcp.flags & TCP_FLAG_FIN) != 0;
            bool rst = is_tcp && (hdr.tcp.flags & TCP_FLAG_RST) != 0;
            // A TCP connection starts with a SYN; a UDP flow with any packet not yet known.
            bool starts_flow = syn || (!is_tcp && !same);

            if (same && !(syn && (closing || !live))) {
                // A known connection (a retransmitted SYN included): keep its backend.
                meta.backend_id = stored_backend & ~CONN_CLOSING_FLAG;
                meta.have_backend = 1;
                if (rst) {
                    conn_sig.write(meta.flow_index, 0);
                } else {
                    conn_seen.write(meta.flow_index, now);
                    if (fin) {
                        conn_backend.write(meta.flow_index, stored_backend | CONN_CLOSING_FLAG);
                    }
                }
            } else if (starts_flow) {
                if (live && !same) {
                    // The index belongs to another live flow: choose statelessly (the
                    // flow's later packets recompute the same choice) and ask the
                    // controller for an exact entry.
                    meta.collision = 1;
                    meta.select_mode = SELECT_POOL;
                } else {
                    meta.track_new = 1;
                    if (meta.algorithm == ALGO_WRR) {
                        meta.select_mode = SELECT_WRR;
                    } else {
                        meta.select_mode = SELECT_POOL;
                    }
                }
            } else {
                // Mid-connection packet with no state (a colliding flow before its entry
                // lands): the same stateless choice its first packet got.
                meta.select_mode = SELECT_POOL;
            }

            selection.apply(hdr, meta, std_meta);

            if (meta.have_backend == 1 && meta.track_new == 1) {
                conn_sig.write(meta.flow_index, meta.flow_sig);
                conn_backend.write(meta.flow_index, meta.backend_id);
                conn_seen.write(meta.flow_index, now);
            }
            if (meta.have_backend == 1 && meta.collision == 1) {
                digest<conn_digest_t>((bit<32>)1,
                    { hdr.ipv4.src_addr, meta.vip_addr, hdr.ipv4.protocol,
                      meta.l4_src_port, meta.l4_dst_port, meta.backend_id });
            }
        }
    }
}

#endif
