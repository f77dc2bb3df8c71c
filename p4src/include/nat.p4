/* NAT both ways: VIP -> backend toward the servers, backend -> VIP on the way back,
 * with the per-backend counters the controller reads. */
#ifndef P4LB_NAT_P4
#define P4LB_NAT_P4

control ToBackend(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    @name(".backend_tx")
    counter(MAX_BACKENDS, CounterType.packets_and_bytes) backend_tx;
    @name(".backend_conns")
    counter(MAX_BACKENDS, CounterType.packets) backend_conns;

    @name(".set_backend")
    action set_backend(ipv4_addr_t addr, bit<16> port) {
        meta.backend_addr = addr;
        meta.backend_port = port;
    }

    // Matches a backend id. Hit: that backend's address and port, written into the packet.
    // The controller writes one entry per backend and keeps it while the backend is
    // drained, so open connections to it keep working.
    @name(".backend_table")
    table backend_table {
        key = { meta.backend_id: exact @name("backend_id"); }
        actions = { set_backend; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_BACKENDS;
    }

    apply {
        if (meta.have_backend == 0) {
            meta.drop_reason = DROP_NO_BACKEND;
        } else if (!backend_table.apply().hit) {
            meta.drop_reason = DROP_NO_BACKEND;
        } else {
            hdr.ipv4.dst_addr = meta.backend_addr;
            if (hdr.tcp.isValid()) {
                hdr.tcp.dst_port = meta.backend_port;
            } else {
                hdr.udp.dst_port = meta.backend_port;
            }
            meta.l4_rewritten = 1;
            backend_tx.count((bit<32>)meta.backend_id);
            if (meta.track_new == 1 || meta.collision == 1) {
                backend_conns.count((bit<32>)meta.backend_id);
            }
        }
    }
}

control FromBackend(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t std_meta) {
    @name(".backend_rx")
    counter(MAX_BACKENDS, CounterType.packets_and_bytes) backend_rx;

    @name(".set_vip_source")
    action set_vip_source(ipv4_addr_t vip_addr, bit<16> vip_port, backend_id_t backend_id) {
        hdr.ipv4.src_addr = vip_addr;
        meta.backend_port = vip_port;
        meta.backend_id = backend_id;
    }

    // Matches a backend's (address, protocol, port) as the source of a reply.
    // Hit: the source becomes the VIP, so clients only ever see the VIP.
    // The controller writes one entry per backend.
    @name(".reverse_nat_table")
    table reverse_nat_table {
        key = {
            hdr.ipv4.src_addr: exact @name("addr");
            hdr.ipv4.protocol: exact @name("protocol");
            meta.l4_src_port:  exact @name("port");
        }
        actions = { set_vip_source; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_BACKENDS;
    }

    apply {
        if (hdr.tcp.isValid() || hdr.udp.isValid()) {
            if (reverse_nat_table.apply().hit) {
                if (hdr.tcp.isValid()) {
                    hdr.tcp.src_port = meta.backend_port;
                } else {
                    hdr.udp.src_port = meta.backend_port;
                }
                meta.l4_rewritten = 1;
                backend_rx.count((bit<32>)meta.backend_id);
            }
        }
    }
}

#endif
