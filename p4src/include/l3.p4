/* Plain IPv4 routing for everything after load balancing (and everything else). */
#ifndef P4LB_L3_P4
#define P4LB_L3_P4

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
        meta.drop_reason = DROP_NO_ROUTE;
    }

    // Longest-prefix match on the (possibly rewritten) destination. Hit: out of a port,
    // with the next hop's MAC. The controller writes one route per host or prefix.
    @name(".ipv4_route_table")
    table ipv4_route_table {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { forward; @defaultonly no_route; }
        const default_action = no_route();
        size = ROUTE_TABLE_SIZE;
    }

    apply {
        ipv4_route_table.apply();
    }
}

#endif
