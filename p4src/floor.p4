/* The floor: the least work a NAT load balancer with connection state can do per packet,
 * on top of plain forwarding with lb.p4's parser and checksums (a NAT balancer parses the
 * transport header; baseline.p4 need not). Not a load balancer (one backend per VIP, nothing expires); it
 * measures what BMv2 charges for the steps every such program takes (bench/floor.py).
 * FLOOR_LEVEL picks how many steps, each adding to the one before:
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
#define P4LB_BASELINE  // the parser's and routing's metadata only, plus the fields below
#if FLOOR_LEVEL >= 2
#define P4LB_FLOOR_META bit<32> sig; bit<64> slot;
#endif
#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/l3.p4"

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

V1Switch(LbParser(),
         LbVerifyChecksum(),
         FloorIngress(),
         FloorEgress(),
         LbComputeChecksum(),
         LbDeparser()) main;
