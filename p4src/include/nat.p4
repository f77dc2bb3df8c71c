/* NAT both ways: VIP -> backend toward the servers (in the egress; for a direct server
 * return VIP only the frame), backend -> VIP on the way back (in the ingress, where the
 * connection state is updated), with the per-backend counters the controller reads. */
#ifndef P4LB_NAT_P4
#define P4LB_NAT_P4

// An IPv6 TCP or UDP checksum after a rewrite of its addresses and ports: `delta`, the
// ones'-complement sum of what the rewrite changes (the old words' complements and the
// new words, over the pseudo-header and the port), is a constant per backend the
// controller computes, added as RFC 1624's eqn. 3 does: HC' = ~(~HC + delta), the carry
// folded back once. A checksum calculation of its own (checksums.p4) would cost every
// packet its condition. UDP over IPv6 always has a checksum, and a computed 0 is sent as
// 0xffff (RFC 8200 8.1). meta.index is free by then: no field of its own.
#define L4_CHECKSUM_ADD(delta) \
    if (hdr.tcp.isValid()) { \
        meta.index = (bit<32>)(~hdr.tcp.checksum) + (bit<32>)(delta); \
        hdr.tcp.checksum = ~(meta.index[15:0] + (bit<16>)meta.index[16:16]); \
    } else { \
        meta.index = (bit<32>)(~hdr.udp.checksum) + (bit<32>)(delta); \
        hdr.udp.checksum = ~(meta.index[15:0] + (bit<16>)meta.index[16:16]); \
        if (hdr.udp.checksum == 0) { hdr.udp.checksum = 0xffff; } \
    }

// In the egress, for every packet: the ingress chose the backend and its port; the
// rewrite runs here, in a thread of its own in BMv2.
control ToBackend(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    // Per backend entry: packets and bytes sent toward it.
    @name(".backend_tx")
    direct_counter(CounterType.packets_and_bytes) backend_tx;

    // Rewrite the destination to the backend, and the frame to its MAC: backends are on
    // the switch's own ports, so no route lookup is needed. Then count what the packet did
    // to its connection (affinity.p4).
    @name(".set_backend")
    action set_backend(ipv4_addr_t addr, bit<16> port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        hdr.ipv4.dst_addr = addr;
        hdr.l4.dst_port = port;
        meta.l4_rewritten = 1;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        CONNECTION_EVENTS();
    }

    // The same for an IPv6 VIP's backend: the hop limit as the TTL, and the TCP/UDP
    // checksum by the backend's constant delta (L4_CHECKSUM_ADD).
    @name(".set_backend_ipv6")
    action set_backend_ipv6(ipv6_addr_t addr, bit<16> port, mac_addr_t src_mac,
                            mac_addr_t dst_mac, bit<16> csum_delta) {
        hdr.ipv6.dst_addr = addr;
        hdr.l4.dst_port = port;
        L4_CHECKSUM_ADD(csum_delta)
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
        CONNECTION_EVENTS();
    }

    // Direct server return (a VIP in mode "dsr"): only the frame changes, toward the
    // backend's MAC. The destination stays the VIP, which the backend holds itself (on its
    // loopback, answering no ARP for it) and answers the client from, directly: the
    // replies never come back through the switch. Nothing a checksum covers is rewritten,
    // and the TTL stays: the backend is a neighbour on the segment, as in IPVS's direct
    // routing. Then count what the packet did to its connection, as set_backend does.
    @name(".set_backend_dsr")
    action set_backend_dsr(mac_addr_t src_mac, mac_addr_t dst_mac) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        CONNECTION_EVENTS();
    }

    // No backend: a packet to a VIP whose backend was removed while connections to it
    // were open is dropped (its connection's events are counted all the same: the
    // ingress changed its state). Any other packet (backend id 0) goes on, unless it is a
    // flooded copy (its mcast_grp still the flood group) on the port it came in by.
    // Conditions in the action, not around the table: BMv2 evaluates a condition between
    // tables at a far higher cost than one inside an action.
    action unknown_backend() {
        if (meta.service_id != 0) {
            meta.drop_reason = DropReason.NO_BACKEND;
            COUNT_DROP();
            CONNECTION_EVENTS();
        } else if (std_meta.mcast_grp == FLOOD_MCAST_GROUP
                   && std_meta.egress_port == std_meta.ingress_port) {
            mark_to_drop(std_meta);
        }
    }

    // Matches a backend id: every packet looks it up (0 for a packet not to a VIP). Hit:
    // that backend's address and port written into the packet (NAT), or only its MAC
    // (DSR). The controller writes one
    // entry per backend (never id 0) and keeps it while the backend is drained, so open
    // connections to it keep working. Miss: unknown_backend.
    @name(".backend_table")
    table backend_table {
        key = { meta.backend_id: exact @name("backend_id"); }
        actions = { set_backend; set_backend_ipv6; set_backend_dsr; @defaultonly unknown_backend; }
        const default_action = unknown_backend();
        counters = backend_tx;
        size = MAX_BACKENDS;
    }

    apply {
        backend_table.apply();
    }
}

control FromBackend(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t std_meta) {
    // Per backend entry: packets and bytes of its replies.
    @name(".backend_rx")
    direct_counter(CounterType.packets_and_bytes) backend_rx;

    // service_id: the VIP's, for the connection's state lookup. backend_id: the entry's
    // backend (a restarted controller also recovers its id assignment from it).
    // track_time: the VIP balances on response time, so the backend's pushed segments are
    // timed. cookie: the VIP's connections are shared by a tier of balancers: the reply's
    // TSval carries the backend id in its low COOKIE_BITS, which the client echoes in
    // TSecr, so whichever balancer its next packets reach finds the backend
    // (ConnectionState's cookie_table).
    // The connection's state follows a backend's FIN or RST, and a timed answer
    // (REPLY_STATE, affinity.p4), within this action.
    @name(".set_vip_source")
    action set_vip_source(ipv4_addr_t vip_addr, bit<16> vip_port, service_id_t service_id,
                          backend_id_t backend_id, bit<1> track_time, bit<1> cookie) {
        hdr.ipv4.src_addr = vip_addr;
        hdr.l4.src_port = vip_port;
        meta.l4_rewritten = 1;
        // The cookie goes into the next block of 2^COOKIE_BITS ticks: a stamped TSval is
        // above the backend's own and never goes down, so the client's PAWS check (RFC
        // 7323, 5) passes whichever segments were stamped. Not a SYN-ACK: Linux accepts
        // the handshake's ACK only if it echoes a TSval the SYN-ACK carried.
        if (cookie == 1 && hdr.tcp_ts.isValid() && (meta.tcp_flags & TCP_FLAG_SYN) == 0) {
            hdr.tcp_ts.tsval = (hdr.tcp_ts.tsval[31:COOKIE_BITS] + 1)
                ++ backend_id[COOKIE_BITS - 1:0];
        }
        // Most replies carry none of the three flags: one test for them.
        if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST | TCP_FLAG_PSH)) != 0) {
            if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0 || track_time == 1) {
                REPLY_STATE(hdr.ipv4.dst_addr, service_id)
            }
        }
    }

    // Matches a backend's (address, protocol, port) as the source of a reply.
    // Hit: the source becomes the VIP, so clients only ever see the VIP.
    // The controller writes one entry per backend.
    @name(".reverse_nat_table")
    table reverse_nat_table {
        key = {
            hdr.ipv4.src_addr: exact @name("addr");
            hdr.ipv4.protocol: exact @name("protocol");
            hdr.l4.src_port:   exact @name("port");
        }
        actions = { set_vip_source; @defaultonly NoAction; }
        default_action = NoAction();
        counters = backend_rx;
        size = MAX_BACKENDS;
    }

    apply {
        reverse_nat_table.apply();
    }
}

// A reply from an IPv6 VIP's backend: the source becomes the VIP, its checksum follows
// (the backend's delta's complement, L4_CHECKSUM_ADD), the tier's cookie is stamped into
// its TSval, and the connection's state learns of a backend's FIN or RST and (track_time)
// times its answers, as set_vip_source does. Applied by the IPv6 lookup (ipv6.p4).
control FromBackend6(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t std_meta) {
    // Per backend entry: packets and bytes of its replies.
    @name(".backend_rx6")
    direct_counter(CounterType.packets_and_bytes) backend_rx6;

    @name(".set_vip6_source")
    action set_vip6_source(ipv6_addr_t vip_addr, bit<16> vip_port, service_id_t service_id,
                           backend_id_t backend_id, bit<16> csum_delta, bit<1> track_time,
                           bit<1> cookie) {
        hdr.ipv6.src_addr = vip_addr;
        hdr.l4.src_port = vip_port;
        // The cookie as set_vip_source stamps it. Nothing recomputes an IPv6 reply's
        // checksum: the TSval's change joins the delta (RFC 1624: the old words'
        // complements and the new words added), folded twice to 16 bits in meta.window,
        // free here.
        if (cookie == 1 && hdr.tcp_ts.isValid() && (meta.tcp_flags & TCP_FLAG_SYN) == 0) {
            meta.window = (bit<64>)csum_delta + (bit<64>)(~hdr.tcp_ts.tsval[31:16])
                + (bit<64>)(~hdr.tcp_ts.tsval[15:0]);
            hdr.tcp_ts.tsval = (hdr.tcp_ts.tsval[31:COOKIE_BITS] + 1)
                ++ backend_id[COOKIE_BITS - 1:0];
            meta.window = meta.window + (bit<64>)hdr.tcp_ts.tsval[31:16]
                + (bit<64>)hdr.tcp_ts.tsval[15:0];
            meta.window = (meta.window & 0xffff) + (meta.window >> 16);
            meta.window = (meta.window & 0xffff) + (meta.window >> 16);
            L4_CHECKSUM_ADD(meta.window[15:0])
        } else {
            L4_CHECKSUM_ADD(csum_delta)
        }
        // Most replies carry none of the three flags: one test for them.
        if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST | TCP_FLAG_PSH)) != 0) {
            if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0 || track_time == 1) {
                // backend_id is for a restarted controller, which recovers its ids from
                // the entry; p4c refuses an unused parameter, so it is written where only
                // these replies pay for it (REPLY_STATE overwrites meta.index).
                meta.index = (bit<32>)backend_id;
                REPLY_STATE(hdr.ipv6.dst_addr, service_id)
            }
        }
    }

    // Matches an IPv6 backend's (address, next header, port) as the source of a reply.
    // Hit: the source becomes the VIP. The controller writes one entry per IPv6 backend.
    @name(".reverse_nat6_table")
    table reverse_nat6_table {
        key = {
            hdr.ipv6.src_addr: exact @name("addr");
            hdr.ipv6.next_hdr: exact @name("protocol");
            hdr.l4.src_port:   exact @name("port");
        }
        actions = { set_vip6_source; @defaultonly NoAction; }
        default_action = NoAction();
        counters = backend_rx6;
        size = MAX_BACKENDS;
    }

    apply {
        reverse_nat6_table.apply();
    }
}

#endif
