/* The benchmark's baseline: plain IPv4 forwarding, same parser and routing table as
 * lb.p4, no load balancing. Clients talk straight to one server. */
#include <core.p4>
#include <v1model.p4>

#define P4LB_BASELINE  // its own, small metadata (headers.p4)
#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/l3.p4"

control BaselineIngress(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t std_meta) {
    Routing() routing;
    apply {
        if (hdr.ipv4.isValid() && std_meta.parser_error == error.NoError
                && hdr.ipv4.ttl > 1) {
            routing.apply(hdr, meta, std_meta);
        }
        if (!hdr.ipv4.isValid() || meta.drop_reason != DropReason.NONE
                || std_meta.parser_error != error.NoError || hdr.ipv4.ttl <= 1) {
            mark_to_drop(std_meta);
        }
    }
}

control BaselineEgress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t std_meta) {
    apply { }
}

V1Switch(LbParser(),
         LbVerifyChecksum(),
         BaselineIngress(),
         BaselineEgress(),
         LbComputeChecksum(),
         LbDeparser()) main;
