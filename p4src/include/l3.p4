/* Plain IPv4 routing for everything after load balancing (and everything else). */
#ifndef P4LB_L3_P4
#define P4LB_L3_P4

// A packet the routes refuse is dropped in the action that refuses it, counted by
// reason (drops.p4's COUNT_DROP), not in a condition after the table.

control Routing(inout headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t std_meta) {
    @name(".forward")
    action forward(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".no_route")
    action no_route() {
        meta.drop_reason = DropReason.NO_ROUTE;
        COUNT_DROP();
    }

    // A VIP's address on a port no VIP serves, or a fragment (no L4 header to balance
    // on): the controller gives every VIP address this route.
    @name(".refuse_vip_packet")
    action refuse_vip_packet() {
        meta.drop_reason = DropReason.VIP_PORT_UNKNOWN;
        if (hdr.ipv4.frag_offset != 0 || (hdr.ipv4.flags & 3w1) != 0) {
            meta.drop_reason = DropReason.FRAGMENT;
        }
        COUNT_DROP();
    }

    // Longest-prefix match on the (possibly rewritten) destination. Hit: out of a port,
    // with the next hop's MAC. The controller writes one route per host or prefix.
    @name(".ipv4_route_table")
    table ipv4_route_table {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { forward; refuse_vip_packet; @defaultonly no_route; }
        const default_action = no_route();
        size = ROUTE_TABLE_SIZE;
    }

    apply {
        ipv4_route_table.apply();
    }
}

#endif
