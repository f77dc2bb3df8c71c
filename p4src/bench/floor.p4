/* The floor: the least work a NAT load balancer with connection state can do per packet,
 * on top of plain forwarding with lb.p4's parser and checksums (a NAT balancer parses the
 * transport header; baseline.p4 need not): the same checks (include/checks.p4), without
 * the TCP timestamp lb.p4 looks for. Not a load balancer (one backend per VIP, nothing
 * expires); it measures what BMv2 charges for the steps every such program takes
 * (bench/floor.py). FLOOR_LEVEL picks how many steps, each adding to the one before:
 *   1  NAT: a VIP table rewrites a client's TCP packet to its backend, a reverse table
 *      rewrites the reply to the VIP, and the TCP checksum is recomputed both ways;
 *   2  + on a client's packet, a CRC32 of its address and port (the signature);
 *   3  + one read of a 64-bit register entry indexed by it;
 *   4  + a compare with the signature and one write back.
 * UDP is routed, not rewritten: that keeps the floor lower still. */
#include <core.p4>
#include <v1model.p4>

#ifndef FLOOR_LEVEL
#define FLOOR_LEVEL 4
#endif
#include "../include/size.p4"
#include "../include/defines.p4"
#include "../include/headers.p4"

struct headers_t {
    ethernet_t     ethernet;
    arp_t          arp;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    l4_ports_t     l4;
    tcp_t          tcp;
    udp_t          udp;
}

// What the parser, the checksums and routing use, and the state's fields. BMv2 resets
// every metadata field of every packet: the floor carries no field it does not use.
struct metadata_t {
    bit<16>       l4_len;
    bit<1>        l4_rewritten;
    bit<8>        tcp_flags;
    DropReason    drop_reason;
    bit<1>        checks;
#if FLOOR_LEVEL >= 2
    bit<32>       sig;
    bit<64>       slot;
#endif
}

#include "../include/checks.p4"

// lb.p4's parser (include/parser.p4) without the TCP options.
parser FloorParser(packet_in pkt,
                   out headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t std_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            default:        accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        meta.l4_len = hdr.ipv4.total_len - (((bit<16>)hdr.ipv4.ihl) << 2);
        meta.checks = (bit<1>)IPV4_LENGTHS_VALID;
        transition select(meta.checks, hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.src_addr,
                          hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            IPV4_INVALID_KEYSETS;
            (_, 4, 5, _, 0 &&& 1, 0, IP_PROTO_TCP): parse_tcp;
            (_, 4, 5, _, 0 &&& 1, 0, IP_PROTO_UDP): parse_udp;
            (_, 4, 5, _, _, _, _):                  accept;
            (_, 4, _, _, _, _, _):                  parse_ipv4_options;
            default:                                ipv4_invalid;
        }
    }

    IPV4_INVALID_STATES

    state parse_ipv4_options {
        pkt.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
        transition select(hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0 &&& 1, 0, IP_PROTO_TCP): parse_tcp;
            (0 &&& 1, 0, IP_PROTO_UDP): parse_udp;
            default:                    accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.l4);
        pkt.extract(hdr.tcp);
        meta.tcp_flags = hdr.tcp.flags;
        meta.checks = (bit<1>)TCP_LENGTH_VALID;
        transition select(meta.checks, hdr.tcp.data_offset, hdr.tcp.flags) {
            TCP_INVALID_KEYSETS;
            default: accept;
        }
    }

    TCP_INVALID_STATES

    state parse_udp {
        pkt.extract(hdr.l4);
        pkt.extract(hdr.udp);
        meta.checks = (bit<1>)UDP_LENGTH_VALID;
        transition select(meta.checks) {
            0:       l4_bad_total_len;
            default: accept;
        }
    }
}

control FloorDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.l4);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.udp);
    }
}

// lb.p4's checksums (include/checksums.p4) without the TCP options.
control FloorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
    }
}

control FloorComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.tcp.isValid() && meta.l4_rewritten == 1,
            { TCP_PSEUDO_AND_HEADER },
            hdr.tcp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid() && meta.l4_rewritten == 1
                                     && hdr.udp.checksum != 0,
            { UDP_PSEUDO_AND_HEADER },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

// The routes drop what they refuse without counting it: the floor has no counters.
#define COUNT_DROP() mark_to_drop(std_meta)
#include "../include/l3.p4"

control FloorIngress(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t std_meta) {
    Routing() routing;
    register<bit<64>>(65536) floor_conn;

    action dnat(ipv4_addr_t addr, bit<16> port) {
        hdr.ipv4.dst_addr = addr;
        hdr.l4.dst_port = port;
        meta.l4_rewritten = 1;
    }

    action snat(ipv4_addr_t addr, bit<16> port) {
        hdr.ipv4.src_addr = addr;
        hdr.l4.src_port = port;
        meta.l4_rewritten = 1;
    }

    table floor_vip {
        key = { hdr.ipv4.dst_addr: exact; hdr.l4.dst_port: exact; }
        actions = { dnat; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    table floor_reverse {
        key = { hdr.ipv4.src_addr: exact; hdr.l4.src_port: exact; }
        actions = { snat; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    apply {
        if (hdr.ipv4.isValid() && std_meta.parser_error == error.NoError
                && hdr.ipv4.ttl > 1) {
            // A client's packet hits the VIP table; a reply misses it (the bench sends
            // both on port 1) and hits the reverse table.
            if (hdr.tcp.isValid()) {
                if (floor_vip.apply().hit) {
#if FLOOR_LEVEL >= 2
                    hash(meta.sig, HashAlgorithm.crc32, 32w0,
                         { hdr.ipv4.src_addr, hdr.l4.src_port }, 32w0xffffffff);
#endif
#if FLOOR_LEVEL >= 3
                    floor_conn.read(meta.slot, meta.sig & 0xffff);
#endif
#if FLOOR_LEVEL >= 4
                    if (meta.slot[31:0] != meta.sig) {
                        meta.slot = 32w1 ++ meta.sig;
                    }
                    floor_conn.write(meta.sig & 0xffff, meta.slot);
#endif
                } else {
                    floor_reverse.apply();
                }
            }
            routing.apply(hdr, meta, std_meta);
        }
        if (!hdr.ipv4.isValid() || meta.drop_reason != DropReason.NONE
                || std_meta.parser_error != error.NoError || hdr.ipv4.ttl <= 1) {
            mark_to_drop(std_meta);
        }
    }
}

control FloorEgress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t std_meta) {
    apply { }
}

V1Switch(FloorParser(),
         FloorVerifyChecksum(),
         FloorIngress(),
         FloorEgress(),
         FloorComputeChecksum(),
         FloorDeparser()) main;
