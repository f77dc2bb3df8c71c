/* IPv6, for every IPv6 packet the parser accepted (ingress.p4): a packet to an IPv6 VIP
 * is balanced as an IPv4 VIP's is (its connection's state in the same buckets, the
 * client's 128-bit address hashed, never stored; a new flow's backend chosen by the
 * ingress's ConnectionState, a flow its full bucket could not hold pinned in conn6_table
 * here), a backend's reply becomes the VIP's (nat.p4's FromBackend6). A neighbour
 * solicitation for a VIP is answered, as ARP for an IPv4 VIP is (vip.p4); the rest of
 * neighbour discovery is flooded: hosts resolve each other, and so is what is sent to the
 * link with hop limit 1 (multicast listener reports). The rest is routed on its
 * destination, its hop limit decremented, or dropped (and counted) when the hop limit is
 * 0 or 1, as the IPv4 routes do with the TTL (l3.p4). */
#ifndef P4LB_IPV6_P4
#define P4LB_IPV6_P4

control Ipv6Forwarding(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t std_meta) {
    FromBackend6() from_backend6;

    // An IPv6 VIP's flip entry, as vip.p4's set_vip: the flow's state looked up (the
    // client's address hashed with its port and the service id), a known flow sent on,
    // and on a VIP whose connections a tier shares (shared) a client's FIN or RST
    // reported in IPv6's digest.
    // Source hash: the selection's source_slot hashes the IPv4 source; an IPv6 VIP's
    // slot is the CRC32 of the client's 128-bit address modulo the slot count, taken here
    // where the family is known, and handed on in meta.index as source_slot's base with
    // a size of 1 (its hash modulo 1 adds 0): the IPv4 path gains no condition.
    @name(".set_vip6")
    action set_vip6(service_id_t service_id, Algorithm algorithm, version_t version,
                    bit<16> pool_size, bit<16> slot_count, bit<1> shared) {
        meta.service_id = service_id;
        meta.algorithm = algorithm;
        CONN_LOOKUP(hdr.ipv6.src_addr, hdr.l4.src_port, service_id);
        CONN_REFRESH(shared, CONN6_EVENT(conn6_closed_t, CONN_CLOSED))
        if (meta.flow_status == FLOW_UNKNOWN) {
            meta.version = version;
            if (algorithm == Algorithm.IPHASH) {
                meta.size = (bit<32>)pool_size;
            } else {
                meta.size = (bit<32>)slot_count;
                if (algorithm == Algorithm.SRCHASH && slot_count != 0) {
                    hash(meta.index, HashAlgorithm.crc32, 32w0,
                         { hdr.ipv6.src_addr }, meta.size);
                    meta.size = 1;
                }
            }
        }
    }

    // Matches (IPv6 VIP address, next header, port). Hit: the packet is load-balanced.
    // Miss: a reply or routed (a VIP's address otherwise has a route that refuses it).
    // The controller writes one entry per IPv6 VIP and modifies it to flip versions.
    @name(".vip6_table")
    table vip6_table {
        key = {
            hdr.ipv6.dst_addr: exact @name("addr");
            hdr.ipv6.next_hdr: exact @name("protocol");
            hdr.l4.dst_port:   exact @name("port");
        }
        actions = { set_vip6; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_SERVICES;
    }

    // A flow the controller pinned (its bucket was full when it started: affinity.p4's
    // new_connection sent conn6_digest_t): its backend and the port it leaves by, as a
    // connection slot holds them, so it is a known flow and the ingress's
    // ConnectionState passes it by.
    @name(".use_backend6")
    action use_backend6(backend_id_t backend_id, port_id_t switch_port) {
        meta.backend_id = backend_id;
        std_meta.egress_spec = switch_port;
        meta.flow_status = FLOW_KNOWN;
    }

    // A shared VIP's connection another balancer of the tier opened (the tier's
    // controller copied its backend and port here), as a pinned flow; the client's FIN or
    // RST reports its end, as at its first balancer (affinity.p4's use_shared_backend).
    @name(".use_shared_backend6")
    action use_shared_backend6(backend_id_t backend_id, port_id_t switch_port) {
        use_backend6(backend_id, switch_port);
        if ((meta.tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) != 0) {
            CONN6_EVENT(copy6_closed_t, CONN_CLOSED);
        }
    }

    // Matches an IPv6 flow's 5-tuple (as the client sent it, to the VIP). Hit: the
    // backend the controller recorded for a flow whose bucket was full, or
    // (use_shared_backend6) for a shared VIP's connection another balancer of the tier
    // opened. Miss: the source check, then ConnectionState. Consulted only when the
    // buckets do not know the flow, and here, where the family is already known: no IPv4
    // packet pays for it (conn_table, IPv4's, is ConnectionState's). The controller writes it from
    // conn6_digest_t and the tier's connection events; aged out by idle timeout.
    @name(".conn6_table")
    table conn6_table {
        key = {
            hdr.ipv6.src_addr: exact @name("src_addr");
            hdr.ipv6.dst_addr: exact @name("dst_addr");
            hdr.ipv6.next_hdr: exact @name("protocol");
            hdr.l4.src_port:   exact @name("src_port");
            hdr.l4.dst_port:   exact @name("dst_port");
        }
        actions = { use_backend6; use_shared_backend6; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CONN_TABLE_SIZE;
        support_timeout = true;
    }

    // A new flow from a source no client sends from: dropped, counted, and marked known
    // so the ingress's ConnectionState passes it by.
    @name(".vip6_source")
    action vip6_source() {
        meta.drop_reason = DropReason.MARTIAN_SOURCE;
        COUNT_DROP();
        meta.flow_status = FLOW_KNOWN;
    }

    // A link-local source (fe80::/10) is a neighbour's on its own link: never a client
    // of a VIP, which is not on-link. The condition in the action, not around the table.
    action link_local_source() {
        if (hdr.ipv6.src_addr[127:118] == 0x3fa) {
            vip6_source();
        }
    }

    // Matches a new flow's source. Hit: an IPv6 VIP's address. Miss: link_local_source.
    // The controller writes one entry per IPv6 VIP address.
    @name(".vip6_source_table")
    table vip6_source_table {
        key = { hdr.ipv6.src_addr: exact @name("addr"); }
        actions = { vip6_source; @defaultonly link_local_source; }
        const default_action = link_local_source();
        size = MAX_SERVICES;
    }

    @name(".forward_ipv6")
    action forward_ipv6(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

    @name(".no_route_ipv6")
    action no_route_ipv6() {
        meta.drop_reason = DropReason.NO_ROUTE;
        COUNT_DROP();
    }

    // An IPv6 VIP's address with no VIP on its next header and port: a fragment (no
    // ports to balance on), an extension header before the TCP/UDP one (the parser takes
    // none apart), or a port no VIP serves. The controller gives every IPv6 VIP address
    // this route.
    @name(".refuse_vip6_packet")
    action refuse_vip6_packet() {
        meta.drop_reason = DropReason.VIP_PORT_UNKNOWN;
        if (hdr.ipv6.next_hdr == IPV6_FRAGMENT) {
            meta.drop_reason = DropReason.FRAGMENT;
        } else if (hdr.ipv6.next_hdr == IPV6_HOP_BY_HOP || hdr.ipv6.next_hdr == IPV6_ROUTING
                   || hdr.ipv6.next_hdr == IPV6_DEST_OPTS || hdr.ipv6.next_hdr == IPV6_AUTH
                   || hdr.ipv6.next_hdr == IPV6_MOBILITY || hdr.ipv6.next_hdr == IPV6_HIP
                   || hdr.ipv6.next_hdr == IPV6_SHIM6) {
            meta.drop_reason = DropReason.EXTENSION_HEADER;
        }
        COUNT_DROP();
    }

    action hop_limit_expired() {
        meta.drop_reason = DropReason.TTL_EXPIRED;
        COUNT_DROP();
    }

    // Flood to every port but the ingress one (the egress drops that copy).
    action flood() {
        std_meta.mcast_grp = FLOOD_MCAST_GROUP;
    }

    // Answer a neighbour solicitation for an IPv6 VIP with an advertisement, in place, as
    // ARP is answered for an IPv4 VIP (vip.p4): back out of its port, from the VIP to the
    // asker, solicited and override set, the option turned into the target's link-layer
    // address, the VIP's MAC. The ICMPv6 checksum follows the words that changed (RFC 1624,
    // as nat.p4's L4_CHECKSUM_ADD): the type (+0x0100), the flags, the option's type
    // (+0x0100) and address, and in the pseudo-header the destination, which becomes the
    // source (the target) while the source becomes the destination. No local variables:
    // meta.index and meta.window, free here, hold the sum.
    @name(".vip6_address")
    action vip6_address(mac_addr_t vip_mac) {
        if (hdr.nd_solicit.opt_type != ND_OPT_SOURCE_LLADDR
                || hdr.nd_solicit.opt_length != 1) {
            flood();
        } else {
            meta.window = (bit<64>)(~hdr.icmpv6.checksum) + 0x0100 + 0x0100
                + (bit<64>)ND_FLAGS_SOLICITED_OVERRIDE[31:16]
                + (bit<64>)(~hdr.nd_solicit.lladdr[47:32])
                + (bit<64>)(~hdr.nd_solicit.lladdr[31:16])
                + (bit<64>)(~hdr.nd_solicit.lladdr[15:0])
                + (bit<64>)vip_mac[47:32] + (bit<64>)vip_mac[31:16] + (bit<64>)vip_mac[15:0]
                + (bit<64>)(~hdr.ipv6.dst_addr[127:112]) + (bit<64>)(~hdr.ipv6.dst_addr[111:96])
                + (bit<64>)(~hdr.ipv6.dst_addr[95:80]) + (bit<64>)(~hdr.ipv6.dst_addr[79:64])
                + (bit<64>)(~hdr.ipv6.dst_addr[63:48]) + (bit<64>)(~hdr.ipv6.dst_addr[47:32])
                + (bit<64>)(~hdr.ipv6.dst_addr[31:16]) + (bit<64>)(~hdr.ipv6.dst_addr[15:0])
                + (bit<64>)hdr.nd_solicit.target[127:112] + (bit<64>)hdr.nd_solicit.target[111:96]
                + (bit<64>)hdr.nd_solicit.target[95:80] + (bit<64>)hdr.nd_solicit.target[79:64]
                + (bit<64>)hdr.nd_solicit.target[63:48] + (bit<64>)hdr.nd_solicit.target[47:32]
                + (bit<64>)hdr.nd_solicit.target[31:16] + (bit<64>)hdr.nd_solicit.target[15:0];
            // 26 words of 16 bits: the sum fits 21 bits; two folds bring it to 16.
            meta.index = (bit<32>)meta.window[15:0] + (bit<32>)meta.window[31:16];
            meta.index = (bit<32>)meta.index[15:0] + (bit<32>)meta.index[31:16];
            hdr.icmpv6.checksum = ~meta.index[15:0];
            hdr.icmpv6.type = ND_NEIGHBOR_ADVERT;
            hdr.nd_solicit.reserved = ND_FLAGS_SOLICITED_OVERRIDE;
            hdr.nd_solicit.opt_type = ND_OPT_TARGET_LLADDR;
            hdr.ethernet.dst_addr = hdr.nd_solicit.lladdr;
            hdr.nd_solicit.lladdr = vip_mac;
            hdr.ethernet.src_addr = vip_mac;
            hdr.ipv6.dst_addr = hdr.ipv6.src_addr;
            hdr.ipv6.src_addr = hdr.nd_solicit.target;
            std_meta.egress_spec = std_meta.ingress_port;
        }
    }

    // Matches a neighbour solicitation's target. Hit: an IPv6 VIP's address, answered with
    // vip_mac (a solicitation whose option is not the asker's link-layer address: flooded).
    // Miss: flooded. The controller
    // writes one entry per IPv6 VIP address.
    @name(".vip6_address_table")
    table vip6_address_table {
        key = { hdr.nd_solicit.target: exact @name("addr"); }
        actions = { vip6_address; @defaultonly flood; }
        const default_action = flood();
        size = MAX_SERVICES;
    }

    // Longest-prefix match on the (possibly rewritten) destination. Hit: out of a port,
    // with the next hop's MAC, or (an IPv6 VIP's address) refused. Miss: dropped,
    // counted. The controller writes one route per IPv6 host, backend or prefix.
    @name(".ipv6_route_table")
    table ipv6_route_table {
        key = { hdr.ipv6.dst_addr: lpm @name("dst_addr"); }
        actions = { forward_ipv6; refuse_vip6_packet; @defaultonly no_route_ipv6; }
        const default_action = no_route_ipv6();
        size = ROUTE_TABLE_SIZE;
    }

    // TCP or UDP to a VIP, the commonest, evaluates one condition: neighbour discovery
    // (which the parser let through only with hop limit 255) is the rest.
    apply {
        if (hdr.ipv6.hop_limit > 1 && !(hdr.icmpv6.isValid()
                && hdr.icmpv6.type >= ND_ROUTER_SOLICIT && hdr.icmpv6.type <= ND_REDIRECT)) {
            switch (vip6_table.apply().action_run) {
                set_vip6: {
                    // A pinned flow passed the source check when it started.
                    if (meta.flow_status == FLOW_UNKNOWN) {
                        if (conn6_table.apply().miss) {
                            vip6_source_table.apply();
                        }
                    }
                }
                default: {
                    from_backend6.apply(hdr, meta, std_meta);
                    ipv6_route_table.apply();
                }
            }
        } else if (hdr.nd_solicit.isValid()) {
            vip6_address_table.apply();
        } else if (hdr.icmpv6.isValid() && hdr.icmpv6.type >= ND_ROUTER_SOLICIT
                && hdr.icmpv6.type <= ND_REDIRECT) {
            flood();
        } else if (hdr.ipv6.dst_addr[127:112] == IPV6_LINK_SCOPE_MULTICAST) {
            flood();  // the link's: multicast listener reports
        } else {
            hop_limit_expired();
        }
    }
}

#endif
