/* IPv4 header checksum (verified on the way in, recomputed on the way out) and
 * TCP/UDP checksums, recomputed only for packets whose addresses or ports were rewritten.
 * The fields each covers: headers.p4. Each checksum costs BMv2 its condition for every
 * packet, and its sum where that holds. */
#ifndef P4LB_CHECKSUMS_P4
#define P4LB_CHECKSUMS_P4

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
            { TCP_PSEUDO_AND_HEADER, hdr.tcp_mss.option, TCP_TIMESTAMP },
            hdr.tcp.checksum, HashAlgorithm.csum16);
        // A UDP checksum of 0 means "none" and stays 0.
        update_checksum_with_payload(hdr.udp.isValid() && meta.l4_rewritten == 1
                                     && hdr.udp.checksum != 0,
            { UDP_PSEUDO_AND_HEADER },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

#endif
