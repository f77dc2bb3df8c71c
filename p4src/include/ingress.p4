/* The ingress pipeline: validation, VIP lookup, affinity + selection, NAT, routing,
 * and one place where drops are counted by reason. */
#ifndef P4LB_INGRESS_P4
#define P4LB_INGRESS_P4

control LbIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    // Indexed by service id * NUM_DROP_REASONS + reason; service 0 = not tied to a VIP.
    @name(".drops")
    counter(DROP_COUNTER_SIZE, CounterType.packets) drops;
    // Indexed by service id: new flows whose state index was taken by another flow.
    @name(".collisions")
    counter(MAX_SERVICES, CounterType.packets) collisions;

    VipLookup() vip_lookup;
    ConnectionAffinity() affinity;
    ToBackend() to_backend;
    FromBackend() from_backend;
    Routing() routing;

    apply {
        if (std_meta.parser_error != error.NoError) {
            meta.drop_reason = DROP_MALFORMED;
        } else if (!hdr.arp.isValid() && !hdr.ipv4.isValid()) {
            meta.drop_reason = DROP_UNSUPPORTED;
        } else if (hdr.ipv4.isValid() && std_meta.checksum_error == 1) {
            meta.drop_reason = DROP_BAD_CHECKSUM;
        } else if (hdr.ipv4.isValid() && hdr.ipv4.ttl <= 1) {
            meta.drop_reason = DROP_TTL_EXPIRED;
        } else {
            vip_lookup.apply(hdr, meta, std_meta);
            if (hdr.ipv4.isValid() && meta.drop_reason == DROP_NONE) {
                if (meta.service_id != 0) {
                    affinity.apply(hdr, meta, std_meta);
                    if (meta.collision == 1) {
                        collisions.count((bit<32>)meta.service_id);
                    }
                    to_backend.apply(hdr, meta, std_meta);
                } else if (meta.is_vip_addr == 0) {
                    from_backend.apply(hdr, meta, std_meta);
                }
                if (meta.drop_reason == DROP_NONE) {
                    routing.apply(hdr, meta, std_meta);
                }
            }
        }

        if (meta.drop_reason != DROP_NONE) {
            drops.count((bit<32>)meta.service_id * NUM_DROP_REASONS
                        + (bit<32>)meta.drop_reason);
            mark_to_drop(std_meta);
        }
    }
}

#endif
