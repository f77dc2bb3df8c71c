/* Egress: a flooded copy never goes back out of the port it came in on. */
#ifndef P4LB_EGRESS_P4
#define P4LB_EGRESS_P4

control LbEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t std_meta) {
    apply {
        if (meta.is_flood == 1 && std_meta.egress_port == std_meta.ingress_port) {
            mark_to_drop(std_meta);
        }
    }
}

#endif
