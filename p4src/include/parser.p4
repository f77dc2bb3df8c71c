/* Parser and deparser: Ethernet, ARP, IPv4 (with options), TCP, UDP. */
#ifndef P4LB_PARSER_P4
#define P4LB_PARSER_P4

// Each maps to a DropReason in the ingress (malformed, bad length, bad flags, martian).
error {
    IPv4BadVersion,
    IPv4BadIHL,
    IPv4BadTotalLen,       // total length shorter than the IPv4 header
    IPv4TotalLenTooLong,   // total length longer than the frame carries
    L4BadTotalLen,         // total length shorter than the IPv4 + TCP/UDP headers
    MartianSource,
    TcpBadDataOffset,
    TcpBadFlags
}

// What parse_ipv4 and parse_tcp check with an expression; the rest of their checks are
// keysets of their transitions (the version, IHL and the martian prefixes; the data offset
// and the flag sets), which BMv2 matches on the header's bytes at a fraction of an
// expression's cost. The states ipv4_invalid and tcp_invalid check them all one by one.
#define IPV4_LENGTHS_VALID \
    (hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2 \
     && (bit<32>)hdr.ipv4.total_len + 14 <= std_meta.packet_length \
     && hdr.ipv4.src_addr != hdr.ipv4.dst_addr)
#define TCP_LENGTH_VALID (meta.l4_len >= ((bit<16>)hdr.tcp.data_offset) << 2)
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

parser LbParser(packet_in pkt,
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

    // The checks run once, in the transition: a packet that passes them (nearly all)
    // costs BMv2 one expression and no verify, where a verify per check costs one each. A
    // packet that fails goes through them one by one (ipv4_invalid), so it gets the error
    // of the first check it fails, as before. The expression is written to a field the
    // select then reads (meta.checks, a bit): an expression there, or a bool, costs a PHV
    // field of its own (p4c), reset for every packet, and one more operation.
    // Only an unfragmented datagram (offset 0, no more-fragments flag) is taken apart:
    // a fragment has no ports to balance on, or its later fragments have none.
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

    // Which check fails first, in the order the errors are taken: a select per check,
    // on the header or on meta.checks, and a state per error whose verify is a constant.
    // A verify of an expression, or of a bool field, costs a PHV field (p4c), reset for
    // every packet.
    state ipv4_invalid {
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 0 &&& 0xc): ipv4_bad_ihl;
            (4, 4):         ipv4_bad_ihl;
            (4, _):         ipv4_check_total_len;
            default:        ipv4_bad_version;
        }
    }

    state ipv4_check_total_len {
        meta.checks = (bit<1>)(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2);
        transition select(meta.checks) {
            0:       ipv4_bad_total_len;
            default: ipv4_check_frame_len;
        }
    }

    // The frame may carry padding after the datagram, never less than it claims.
    state ipv4_check_frame_len {
        meta.checks = (bit<1>)((bit<32>)hdr.ipv4.total_len + 14 <= std_meta.packet_length);
        transition select(meta.checks) {
            0:       ipv4_total_len_too_long;
            default: martian_source;
        }
    }

    PARSER_ERROR(ipv4_bad_version, IPv4BadVersion)
    PARSER_ERROR(ipv4_bad_ihl, IPv4BadIHL)
    PARSER_ERROR(ipv4_bad_total_len, IPv4BadTotalLen)
    PARSER_ERROR(ipv4_total_len_too_long, IPv4TotalLenTooLong)
    PARSER_ERROR(martian_source, MartianSource)

    // The options' length goes through meta.index, a field that is there anyway: as an
    // expression it would get a PHV field of its own (p4c), reset for every packet.
    state parse_ipv4_options {
#ifdef P4LB_BASELINE
        pkt.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
#else
        meta.index = ((bit<32>)hdr.ipv4.ihl - 5) << 5;
        pkt.extract(hdr.ipv4_options, meta.index);
#endif
        transition select(hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0 &&& 1, 0, IP_PROTO_TCP): parse_tcp;
            (0 &&& 1, 0, IP_PROTO_UDP): parse_udp;
            default:                    accept;
        }
    }

    // As for IPv4: the checks at once, one by one only when they fail.
    state parse_tcp {
        pkt.extract(hdr.l4);
        pkt.extract(hdr.tcp);
        meta.tcp_flags = hdr.tcp.flags;
        meta.checks = (bit<1>)TCP_LENGTH_VALID;
#ifdef P4LB_BASELINE
        transition select(meta.checks, hdr.tcp.data_offset, hdr.tcp.flags) {
            TCP_INVALID_KEYSETS;
            default: accept;
        }
    }
#else
        // Room for a timestamp option (12 bytes) after the 20-byte header: look for it.
        transition select(meta.checks, hdr.tcp.data_offset, hdr.tcp.flags) {
            TCP_INVALID_KEYSETS;
            (_, 0 &&& 0x8, _): accept;     // 5..7
            default:           parse_tcp_options;
        }
    }

    // The timestamp where Linux puts it: first (after NOP NOP or SACK-permitted: 12 bytes,
    // which a data offset of 8 or more leaves), or after a SYN's MSS (16 bytes: a data
    // offset of 9 or more; at 8 they would run into the payload, tcp_options_mss). Any
    // other layout is carried as it is, like the rest of the options. The select is on the
    // lookahead alone: with the data offset beside it, p4c copies that into a PHV field
    // of its own (reset for every packet).
    state parse_tcp_options {
        transition select(pkt.lookahead<bit<64>>()) {
            TCP_OPT_NOP_NOP_TS ++ 32w0 &&& 0xffffffff00000000: parse_tcp_timestamp;
            TCP_OPT_SACKOK_TS ++ 32w0 &&& 0xffffffff00000000:  parse_tcp_timestamp;
            TCP_OPT_MSS ++ 16w0 ++ TCP_OPT_SACKOK_TS &&& 0xffff0000ffffffff: tcp_options_mss;
            default: accept;
        }
    }

    state tcp_options_mss {
        transition select(hdr.tcp.data_offset) {
            8:       accept;
            default: parse_tcp_mss;
        }
    }

    state parse_tcp_mss {
        pkt.extract(hdr.tcp_mss);
        transition parse_tcp_timestamp;
    }

    state parse_tcp_timestamp {
        pkt.extract(hdr.tcp_ts);
        transition accept;
    }
#endif

    state tcp_invalid {
        transition select(hdr.tcp.data_offset) {
            0 &&& 0xc: tcp_bad_data_offset;
            4:         tcp_bad_data_offset;
            default:   tcp_check_len;
        }
    }

    state tcp_check_len {
        meta.checks = (bit<1>)TCP_LENGTH_VALID;
        transition select(meta.checks) {
            0:       l4_bad_total_len;
            default: tcp_bad_flags;
        }
    }

    PARSER_ERROR(tcp_bad_data_offset, TcpBadDataOffset)
    PARSER_ERROR(l4_bad_total_len, L4BadTotalLen)
    PARSER_ERROR(tcp_bad_flags, TcpBadFlags)

    state parse_udp {
        pkt.extract(hdr.l4);
        pkt.extract(hdr.udp);
        meta.checks = (bit<1>)(meta.l4_len >= 8);
        transition select(meta.checks) {
            0:       l4_bad_total_len;
            default: accept;
        }
    }
}

control LbDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.l4);
        pkt.emit(hdr.tcp);
#ifndef P4LB_BASELINE
        pkt.emit(hdr.tcp_mss);
        pkt.emit(hdr.tcp_ts);
#endif
        pkt.emit(hdr.udp);
    }
}

#endif
