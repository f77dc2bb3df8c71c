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

// Macros, not functions: p4c inlines a function's parameters and return value as PHV
// fields, each one more parser operation and one more field BMv2 resets per packet.
// Sources no host sends from: 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 (multicast) and
// 240.0.0.0/4 (reserved, 255.255.255.255 included), or the destination itself.
// (A VIP as source is caught by the VIP lookup.)
#define IS_MARTIAN_SOURCE(src, dst) \
    ((src)[31:24] == 0 || (src)[31:24] == 127 || (src)[31:28] >= 0xE || (src) == (dst))

// Flag sets no TCP stack sends: SYN+FIN, SYN+RST, none of the six (null scan),
// FIN+PSH+URG (xmas).
#define IS_BAD_TCP_FLAGS(f) \
    (((f) & (TCP_FLAG_SYN | TCP_FLAG_FIN)) == (TCP_FLAG_SYN | TCP_FLAG_FIN) \
     || ((f) & (TCP_FLAG_SYN | TCP_FLAG_RST)) == (TCP_FLAG_SYN | TCP_FLAG_RST) \
     || ((f) & 0x3f) == 0 \
     || ((f) & (TCP_FLAG_FIN | TCP_FLAG_PSH | TCP_FLAG_URG)) \
        == (TCP_FLAG_FIN | TCP_FLAG_PSH | TCP_FLAG_URG))

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

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.IPv4BadIHL);
        verify(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2, error.IPv4BadTotalLen);
        // The frame may carry padding after the datagram, never less than it claims.
        verify((bit<32>)hdr.ipv4.total_len + 14 <= std_meta.packet_length,
               error.IPv4TotalLenTooLong);
        verify(!IS_MARTIAN_SOURCE(hdr.ipv4.src_addr, hdr.ipv4.dst_addr), error.MartianSource);
        meta.l4_len = hdr.ipv4.total_len - (((bit<16>)hdr.ipv4.ihl) << 2);
        transition select(hdr.ipv4.ihl) {
            5:       parse_l4;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        pkt.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) << 5);
        transition parse_l4;
    }

    // Only an unfragmented datagram (offset 0, no more-fragments flag) is taken apart:
    // a fragment has no ports to balance on, or its later fragments have none.
    state parse_l4 {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.flags[0:0], hdr.ipv4.protocol) {
            (0, 0, IP_PROTO_TCP): parse_tcp;
            (0, 0, IP_PROTO_UDP): parse_udp;
            default:              accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        verify(hdr.tcp.data_offset >= 5, error.TcpBadDataOffset);
        verify(meta.l4_len >= ((bit<16>)hdr.tcp.data_offset) << 2, error.L4BadTotalLen);
        verify(!IS_BAD_TCP_FLAGS(hdr.tcp.flags), error.TcpBadFlags);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        meta.tcp_flags = hdr.tcp.flags;
#ifdef P4LB_BASELINE
        transition accept;
    }
#else
        // Room for a timestamp option (12 bytes) after the 20-byte header: look for it.
        transition select(hdr.tcp.data_offset) {
            0 &&& 0x8: accept;     // 5..7
            default:   parse_tcp_options;
        }
    }

    // The timestamp where Linux puts it: first (after NOP NOP or SACK-permitted: 12 bytes,
    // which a data offset of 8 or more leaves), or after a SYN's MSS (16 bytes: a data
    // offset of 9 or more; at 8 they would run into the payload). Any other layout is
    // carried as it is, like the rest of the options.
    state parse_tcp_options {
        transition select(hdr.tcp.data_offset, pkt.lookahead<bit<64>>()) {
            (_, TCP_OPT_NOP_NOP_TS ++ 32w0 &&& 0xffffffff00000000): parse_tcp_timestamp;
            (_, TCP_OPT_SACKOK_TS ++ 32w0 &&& 0xffffffff00000000):  parse_tcp_timestamp;
            (8, _):                                                 accept;
            (_, TCP_OPT_MSS ++ 16w0 ++ TCP_OPT_SACKOK_TS &&& 0xffff0000ffffffff): parse_tcp_mss;
            default: accept;
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

    state parse_udp {
        pkt.extract(hdr.udp);
        verify(meta.l4_len >= 8, error.L4BadTotalLen);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }
}

control LbDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.tcp);
#ifndef P4LB_BASELINE
        pkt.emit(hdr.tcp_mss);
        pkt.emit(hdr.tcp_ts);
#endif
        pkt.emit(hdr.udp);
    }
}

#endif
