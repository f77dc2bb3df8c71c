/* The benchmark's baseline: the cheapest correct plain IPv4 forwarding p4lb knows how to
 * write for BMv2, not the load balancer's parser minus the load balancer. Ethernet and
 * IPv4 only (options carried as they are): the version checked, the header checksum
 * verified and updated, the TTL decremented (an expiring packet dropped), a longest-prefix
 * route with the next hop's MAC (lb.p4's routing, include/l3.p4). No transport header is
 * parsed: forwarding needs none. Clients talk straight to one server. */
#include <core.p4>
#include <v1model.p4>

#include "../include/size.p4"
#include "../include/defines.p4"
#include "../include/headers.p4"

// What plain forwarding parses.
struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
}

// What routing uses. BMv2 resets every metadata field of every packet, so plain
// forwarding must not carry the load balancer's.
struct metadata_t {
    DropReason    drop_reason;
}

// The routes drop what they refuse without counting it: plain forwarding has no counters.
#define COUNT_DROP() mark_to_drop(std_meta)
#include "../include/l3.p4"

parser BaselineParser(packet_in pkt,
                      out headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t std_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default:        accept;
        }
    }

    // An IHL below 5 makes the options' length negative: the extraction fails, and the
    // parser error drops the packet.
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            5:       accept;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        pkt.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
        transition accept;
    }
}

// One checksum with or without options: BMv2 leaves an invalid header out of the sum.
control BaselineVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
    }
}

control BaselineIngress(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t std_meta) {
    Routing() routing;
    apply {
        // The route's action forwards or drops (no route).
        if (hdr.ipv4.isValid() && std_meta.parser_error == error.NoError
                && std_meta.checksum_error == 0 && hdr.ipv4.version == 4
                && hdr.ipv4.ttl > 1) {
            routing.apply(hdr, meta, std_meta);
        } else {
            mark_to_drop(std_meta);
        }
    }
}

control BaselineEgress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t std_meta) {
    apply { }
}

control BaselineComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
    }
}

control BaselineDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
    }
}

V1Switch(BaselineParser(),
         BaselineVerifyChecksum(),
         BaselineIngress(),
         BaselineEgress(),
         BaselineComputeChecksum(),
         BaselineDeparser()) main;
