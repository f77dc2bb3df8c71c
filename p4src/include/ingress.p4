/* The ingress pipeline: validation, VIP lookup with connection state (a known connection
 * needs nothing more), selection for new flows, reverse NAT and routing for everything
 * else (IPv6 alike, and neighbour discovery flooded), and drops counted by reason in
 * one counter. NAT toward the backends runs in the egress (egress.p4). */
#ifndef P4LB_INGRESS_P4
#define P4LB_INGRESS_P4

control LbIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    VipLookup() vip_lookup;
    ConnectionState() connection_state;
    VipAddresses() vip_addresses;
    Ipv6Forwarding() ipv6_forwarding;
    QosEnqueue() qos_enqueue;

    action count_drop() {
        COUNT_DROP();
    }

    // Matches a drop reason; never written: its key publishes the DropReason names in
    // the P4Info, and its one action counts the drop and drops.
    @name(".drop_table")
    table drop_table {
        key = { meta.drop_reason: exact @name("reason"); }
        actions = { count_drop; }
        const default_action = count_drop();
        size = 1;
    }

    apply {
        if (std_meta.parser_error == error.NoError && hdr.ipv4.isValid()
                && std_meta.checksum_error == 0 && hdr.ipv4.ttl > 1) {
            // The VIP lookup takes it from here (vip.p4).
            vip_lookup.apply(hdr, meta, std_meta);
        } else if (std_meta.parser_error == error.NoError && hdr.arp.isValid()) {
            vip_addresses.apply(hdr, meta, std_meta);
        } else if (std_meta.parser_error == error.NoError && hdr.ipv6.isValid()) {
            // An IPv6 VIP's packet, a reply, routed, or flooded (neighbour discovery); its
            // drops counted there (ipv6.p4).
            ipv6_forwarding.apply(hdr, meta, std_meta);
        } else {
            if (std_meta.parser_error == error.TcpBadFlags) {
                meta.drop_reason = DropReason.BAD_TCP_FLAGS;
            } else if (std_meta.parser_error == error.MartianSource) {
                meta.drop_reason = DropReason.MARTIAN_SOURCE;
            } else if (std_meta.parser_error == error.IPv4BadTotalLen
                       || std_meta.parser_error == error.IPv4TotalLenTooLong
                       || std_meta.parser_error == error.IPv6PayloadLenTooLong
                       || std_meta.parser_error == error.L4BadTotalLen) {
                meta.drop_reason = DropReason.BAD_LENGTH;
            } else if (std_meta.parser_error != error.NoError) {
                meta.drop_reason = DropReason.MALFORMED;
            } else if (!hdr.ipv4.isValid()) {
                meta.drop_reason = DropReason.UNSUPPORTED;
            } else if (std_meta.checksum_error == 1) {
                meta.drop_reason = DropReason.BAD_CHECKSUM;
            } else {
                meta.drop_reason = DropReason.TTL_EXPIRED;
            }
            drop_table.apply();
        }
        // A flow of a VIP (either family) its state does not know gets its backend and
        // port here (or is dropped, counted). Applied from one place: p4c's BMv2 back end
        // refuses a table with two successors.
        if (meta.service_id != 0 && meta.flow_status == FLOW_UNKNOWN) {
            connection_state.apply(hdr, meta, std_meta);
            if (meta.drop_reason != DropReason.NONE) {
                count_drop();
            }
        }
        qos_enqueue.apply(hdr, meta, std_meta);  // one miss unless the port has a discipline
    }
}

#endif
