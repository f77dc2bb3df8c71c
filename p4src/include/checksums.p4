/* IPv4 header checksum (verified on the way in, recomputed on the way out) and
 * TCP/UDP checksums, recomputed only for packets whose addresses or ports were rewritten. */
#ifndef P4LB_CHECKSUMS_P4
#define P4LB_CHECKSUMS_P4

// The TCP checksum's pseudo-header and header fields, and the timestamp option's.
#define TCP_PSEUDO_AND_HEADER \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len, \
    hdr.l4.src_port, hdr.l4.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no, \
    hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.flags, hdr.tcp.window, hdr.tcp.urgent_ptr
#define TCP_TIMESTAMP \
    hdr.tcp_ts.prefix, hdr.tcp_ts.kind, hdr.tcp_ts.length, hdr.tcp_ts.tsval, hdr.tcp_ts.tsecr

// One checksum for IPv4 with and without options, one for TCP with and without the
// timestamp and MSS options: BMv2 leaves an invalid header's fields out of a checksum's
// input (bm_sim/calculations.cpp), so each list names every header that may be there.
// Each checksum costs BMv2 its condition for every packet, and its sum where that holds.
#define IPV4_HEADER \
    hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
    hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options

control LbVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
    }
}

control LbComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), { IPV4_HEADER }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
        // The payload is everything after the last parsed header: TCP options and data.
        // A parsed timestamp option (and the MSS before it) is in the sum in its place.
        update_checksum_with_payload(hdr.tcp.isValid() && meta.l4_rewritten == 1,
#ifdef P4LB_BASELINE
            { TCP_PSEUDO_AND_HEADER },
#else
            { TCP_PSEUDO_AND_HEADER, hdr.tcp_mss.option, TCP_TIMESTAMP },
#endif
            hdr.tcp.checksum, HashAlgorithm.csum16);
        // A UDP checksum of 0 means "none" and stays 0.
        update_checksum_with_payload(hdr.udp.isValid() && meta.l4_rewritten == 1
                                     && hdr.udp.checksum != 0,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len,
              hdr.l4.src_port, hdr.l4.dst_port, hdr.udp.length },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

#endif
