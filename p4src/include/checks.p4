/* What a well-formed packet is, as pieces a parser on these headers is built from: the
 * parser's errors, its checks (expressions and transition keysets) and the states that
 * find which check a failing packet fails first. lb.p4's parser uses them, and so does the
 * floor's (p4src/bench/floor.p4), which must check exactly as lb.p4 does. They read
 * meta.l4_len (the TCP/UDP length) and meta.checks (a bit), which such a parser sets. */
#ifndef P4LB_CHECKS_P4
#define P4LB_CHECKS_P4

// Each maps to a DropReason in the ingress (malformed, bad length, bad flags, martian).
error {
    IPv4BadVersion,
    IPv4BadIHL,
    IPv4BadTotalLen,       // total length shorter than the IPv4 header
    IPv4TotalLenTooLong,   // total length longer than the frame carries
    L4BadTotalLen,         // IP total (IPv6: payload) length shorter than the TCP/UDP header
    MartianSource,
    TcpBadDataOffset,
    TcpBadFlags,
    IPv6BadVersion,
    IPv6PayloadLenTooLong, // payload length longer than the frame carries
    NdBadHopLimit          // neighbour discovery with a hop limit other than 255
}

// What parse_ipv4 and parse_tcp check with an expression; the rest of their checks are
// keysets of their transitions (the version, IHL and the martian prefixes; the data offset
// and the flag sets), which BMv2 matches on the header's bytes at a fraction of an
// expression's cost. The states ipv4_invalid and tcp_invalid check them all one by one.
#define IPV4_LENGTHS_VALID \
    (hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2 \
     && (bit<32>)hdr.ipv4.total_len + 14 <= std_meta.packet_length \
     && hdr.ipv4.src_addr != hdr.ipv4.dst_addr)
// IPv6 has no header checksum, and its header has one length: the payload's.
#define IPV6_LENGTHS_VALID \
    ((bit<32>)hdr.ipv6.payload_len + 54 <= std_meta.packet_length \
     && hdr.ipv6.src_addr != hdr.ipv6.dst_addr)
#define TCP_LENGTH_VALID (meta.l4_len >= ((bit<16>)hdr.tcp.data_offset) << 2)
#define UDP_LENGTH_VALID (meta.l4_len >= 8)
// The transitions to ipv4_invalid ahead of the others: a martian source (the first three
// keysets: sources no host sends from, 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 multicast and
// 240.0.0.0/4 reserved, 255.255.255.255 included; the source equal to the destination is
// in the expression; a VIP as source is caught by the VIP lookup), lengths that do not
// add up, or an IHL below 5 (a version other than 4 falls through every other keyset to
// the default); the key is (checks, version, ihl, src_addr,
// flags, frag_offset, protocol).
#define IPV4_INVALID_KEYSETS \
    (_, _, _, 0x00000000 &&& 0xff000000, _, _, _): ipv4_invalid; \
    (_, _, _, 0x7f000000 &&& 0xff000000, _, _, _): ipv4_invalid; \
    (_, _, _, 0xe0000000 &&& 0xe0000000, _, _, _): ipv4_invalid; \
    (0, _, _, _, _, _, _):                         ipv4_invalid; \
    (_, _, 0 &&& 0xc, _, _, _, _):                 ipv4_invalid; /* IHL 0..3 */ \
    (_, _, 4, _, _, _, _):                         ipv4_invalid
// The same for parse_ipv6 ahead of its others: a martian source (the loopback ::1,
// IPv4-mapped ::ffff:0:0/96, which is never on the wire (RFC 4291 2.5.5.2), multicast
// ff00::/8; the unspecified :: too, except for a neighbour solicitation, which duplicate
// address detection sends from it (RFC 4862 5.4.2: ipv6_unspecified_source), and a
// multicast listener report to the link, sent from it before the interface has an address
// (RFC 3810 5.2.13: ipv6_unspecified_listener, behind its hop-by-hop header); the source
// equal to the destination is in the expression), or a payload longer than the frame (a
// version other than 6 falls through every other keyset to the default); the key is
// (checks, version, src_addr, next_hdr).
#define IPV6_INVALID_KEYSETS \
    (0, _, _, _):                                  ipv6_invalid; \
    (_, _, 1, _):                                  ipv6_invalid; \
    (_, _, 0xffff00000000 &&& 0xffffffffffffffffffffffff00000000, _): ipv6_invalid; \
    (_, _, 0xff000000000000000000000000000000 \
           &&& 0xff000000000000000000000000000000, _): ipv6_invalid; \
    (_, 6, 0, IP_PROTO_ICMPV6):                    ipv6_unspecified_source; \
    (_, 6, 0, IPV6_HOP_BY_HOP):                    ipv6_unspecified_listener; \
    (_, _, 0, _):                                  ipv6_invalid
// The key is (checks, data_offset, flags): flag sets no TCP stack sends (SYN+FIN,
// SYN+RST, none of the six: a null scan, FIN+PSH+URG: xmas), a data offset below 5, or
// a header longer than the datagram.
#define SYN_FIN (TCP_FLAG_SYN | TCP_FLAG_FIN)
#define SYN_RST (TCP_FLAG_SYN | TCP_FLAG_RST)
#define XMAS (TCP_FLAG_FIN | TCP_FLAG_PSH | TCP_FLAG_URG)
#define TCP_INVALID_KEYSETS \
    (_, _, SYN_FIN &&& SYN_FIN): tcp_invalid; \
    (_, _, SYN_RST &&& SYN_RST): tcp_invalid; \
    (_, _, 0 &&& 0x3f):          tcp_invalid; \
    (_, _, XMAS &&& XMAS):       tcp_invalid; \
    (0, _, _):             tcp_invalid; \
    (_, 0 &&& 0xc, _):     tcp_invalid; /* 0..3 */ \
    (_, 4, _):             tcp_invalid

// A state that fails the parse with `err`.
#define PARSER_ERROR(name, err) \
    state name { \
        verify(false, error.err); \
        transition accept; \
    }

// The states a packet failing parse_ipv4's checks goes through, one check at a time, so
// it gets the error of the first check it fails: a select per check, on the header or on
// meta.checks, and a state per error whose verify is a constant. A verify of an
// expression, or of a bool field, costs a PHV field (p4c), reset for every packet. The
// frame may carry padding after the datagram, never less than it claims.
#define IPV4_INVALID_STATES \
    state ipv4_invalid { \
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) { \
            (4, 0 &&& 0xc): ipv4_bad_ihl; \
            (4, 4):         ipv4_bad_ihl; \
            (4, _):         ipv4_check_total_len; \
            default:        ipv4_bad_version; \
        } \
    } \
    state ipv4_check_total_len { \
        meta.checks = (bit<1>)(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2); \
        transition select(meta.checks) { \
            0:       ipv4_bad_total_len; \
            default: ipv4_check_frame_len; \
        } \
    } \
    state ipv4_check_frame_len { \
        meta.checks = (bit<1>)((bit<32>)hdr.ipv4.total_len + 14 <= std_meta.packet_length); \
        transition select(meta.checks) { \
            0:       ipv4_total_len_too_long; \
            default: martian_source; \
        } \
    } \
    PARSER_ERROR(ipv4_bad_version, IPv4BadVersion) \
    PARSER_ERROR(ipv4_bad_ihl, IPv4BadIHL) \
    PARSER_ERROR(ipv4_bad_total_len, IPv4BadTotalLen) \
    PARSER_ERROR(ipv4_total_len_too_long, IPv4TotalLenTooLong) \
    PARSER_ERROR(martian_source, MartianSource)

// The same for parse_ipv6's checks: the version, the payload length against the frame,
// then the source. Only a neighbour solicitation with the ND hop limit may come from ::.
#define IPV6_INVALID_STATES \
    state ipv6_invalid { \
        transition select(hdr.ipv6.version) { \
            6:       ipv6_check_frame_len; \
            default: ipv6_bad_version; \
        } \
    } \
    state ipv6_check_frame_len { \
        meta.checks = (bit<1>)((bit<32>)hdr.ipv6.payload_len + 54 <= std_meta.packet_length); \
        transition select(meta.checks) { \
            0:       ipv6_payload_len_too_long; \
            default: martian_source; \
        } \
    } \
    state ipv6_unspecified_source { \
        pkt.extract(hdr.icmpv6); \
        transition select(hdr.ipv6.hop_limit, hdr.icmpv6.type) { \
            (ND_HOP_LIMIT, ND_NEIGHBOR_SOLICIT): accept; \
            default:                             martian_source; \
        } \
    } \
    state ipv6_unspecified_listener { \
        transition select(hdr.ipv6.hop_limit, hdr.ipv6.dst_addr) { \
            (1, (bit<128>)IPV6_LINK_SCOPE_MULTICAST << 112 \
                &&& 0xffff0000000000000000000000000000): accept; \
            default:                                     martian_source; \
        } \
    } \
    PARSER_ERROR(ipv6_bad_version, IPv6BadVersion) \
    PARSER_ERROR(ipv6_payload_len_too_long, IPv6PayloadLenTooLong)

// The same for parse_tcp's checks; and the error of a datagram shorter than its TCP or
// UDP header.
#define TCP_INVALID_STATES \
    state tcp_invalid { \
        transition select(hdr.tcp.data_offset) { \
            0 &&& 0xc: tcp_bad_data_offset; \
            4:         tcp_bad_data_offset; \
            default:   tcp_check_len; \
        } \
    } \
    state tcp_check_len { \
        meta.checks = (bit<1>)TCP_LENGTH_VALID; \
        transition select(meta.checks) { \
            0:       l4_bad_total_len; \
            default: tcp_bad_flags; \
        } \
    } \
    PARSER_ERROR(tcp_bad_data_offset, TcpBadDataOffset) \
    PARSER_ERROR(l4_bad_total_len, L4BadTotalLen) \
    PARSER_ERROR(tcp_bad_flags, TcpBadFlags)

#endif
