/* IPv6, for every IPv6 packet the parser accepted (ingress.p4): there is no IPv6 VIP
 * yet, so each is forwarded as a packet to no VIP is. Neighbour discovery is flooded, as
 * ARP for an address that is not a VIP is (vip.p4): hosts resolve each other. The rest is
 * routed on its destination, its hop limit decremented, or dropped (and counted) when the
 * hop limit is 0 or 1, as the IPv4 routes do with the TTL (l3.p4). */
#ifndef P4LB_IPV6_P4
#define P4LB_IPV6_P4

control Ipv6Forwarding(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t std_meta) {
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

    action hop_limit_expired() {
        meta.drop_reason = DropReason.TTL_EXPIRED;
        COUNT_DROP();
    }

    // Flood to every port but the ingress one (the egress drops that copy).
    action flood() {
        std_meta.mcast_grp = FLOOD_MCAST_GROUP;
    }

    // Longest-prefix match on the destination. Hit: out of a port, with the next hop's
    // MAC. Miss: dropped, counted. The controller writes one route per IPv6 host or prefix.
    @name(".ipv6_route_table")
    table ipv6_route_table {
        key = { hdr.ipv6.dst_addr: lpm @name("dst_addr"); }
        actions = { forward_ipv6; @defaultonly no_route_ipv6; }
        const default_action = no_route_ipv6();
        size = ROUTE_TABLE_SIZE;
    }

    apply {
        if (hdr.icmpv6.isValid() && hdr.icmpv6.type >= ND_ROUTER_SOLICIT
                && hdr.icmpv6.type <= ND_REDIRECT) {
            flood();
        } else if (hdr.ipv6.hop_limit > 1) {
            ipv6_route_table.apply();
        } else {
            hop_limit_expired();
        }
    }
}

#endif
