/* Parser and deparser: Ethernet, ARP, IPv4 (with options), IPv6 (the fixed header, and
 * neighbour discovery's ICMPv6 messages, a solicitation's target and option), TCP (with
 * the timestamp option where Linux puts it), UDP. What makes a packet malformed is
 * checks.p4's. */
#ifndef P4LB_PARSER_P4
#define P4LB_PARSER_P4

parser LbParser(packet_in pkt,
                out headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t std_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            ETHERTYPE_IPV6: parse_ipv6;
            default:        accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    // The checks run once, in the transition: a packet that passes them (nearly all)
    // costs BMv2 one expression and no verify, where a verify per check costs one each. A
    // packet that fails goes through them one by one (IPV4_INVALID_STATES), so it gets the
    // error of the first check it fails. The expression is written to a field the select
    // then reads (meta.checks, a bit): an expression there, or a bool, costs a PHV field
    // of its own (p4c) and one more operation.
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

    IPV4_INVALID_STATES

    // The options' length goes through meta.index, a field that is there anyway: as an
    // expression it would get a PHV field of its own (p4c).
    state parse_ipv4_options {
        meta.index = ((bit<32>)hdr.ipv4.ihl - 5) << 5;
        pkt.extract(hdr.ipv4_options, meta.index);
        transition select(hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0 &&& 1, 0, IP_PROTO_TCP): parse_tcp;
            (0 &&& 1, 0, IP_PROTO_UDP): parse_udp;
            default:                    accept;
        }
    }

    // As for IPv4: the checks at once, one by one only when they fail (IPV6_INVALID_STATES).
    // TCP, UDP or ICMPv6 right after the fixed header is taken apart. An extension header
    // (hop-by-hop, routing, fragment, destination options, ...) or any other next header
    // is carried as it is, with what follows it: the packet is routed on the fixed header
    // alone, as RFC 8200 section 4 has a router do; to an IPv6 VIP it is refused, counted
    // (ipv6.p4's refuse_vip6_packet: without its ports there is nothing to balance on).
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        meta.l4_len = hdr.ipv6.payload_len;
        meta.checks = (bit<1>)IPV6_LENGTHS_VALID;
        transition select(meta.checks, hdr.ipv6.version, hdr.ipv6.src_addr,
                          hdr.ipv6.next_hdr) {
            IPV6_INVALID_KEYSETS;
            (_, 6, _, IP_PROTO_TCP):    parse_tcp;
            (_, 6, _, IP_PROTO_UDP):    parse_udp;
            (_, 6, _, IP_PROTO_ICMPV6): parse_icmpv6;
            (_, 6, _, _):               accept;
            default:                    ipv6_invalid;
        }
    }

    IPV6_INVALID_STATES

    // ICMPv6's type is read from its header, not a lookahead: p4c copies a lookahead, and
    // a field beside it in the select, into fields of their own (reset for every packet,
    // IPv4's included). Neighbour discovery (the ND_* types) must have the hop limit it is
    // sent with (a receiver discards any other); the ingress floods it as it does ARP.
    // Other ICMPv6 (echo, errors) is routed.
    state parse_icmpv6 {
        pkt.extract(hdr.icmpv6);
        transition select(hdr.ipv6.hop_limit, hdr.icmpv6.type) {
            (ND_HOP_LIMIT, ND_NEIGHBOR_SOLICIT): parse_nd_solicit;
            (ND_HOP_LIMIT, _):        accept;
            (_, ND_ROUTER_SOLICIT):   nd_bad_hop_limit;
            (_, ND_ROUTER_ADVERT):    nd_bad_hop_limit;
            (_, ND_NEIGHBOR_SOLICIT): nd_bad_hop_limit;
            (_, ND_NEIGHBOR_ADVERT):  nd_bad_hop_limit;
            (_, ND_REDIRECT):         nd_bad_hop_limit;
            default:                  accept;
        }
    }

    PARSER_ERROR(nd_bad_hop_limit, NdBadHopLimit)

    // A neighbour solicitation of the length a host's has (the ICMPv6 header, the target
    // and one 8-byte option: 32 bytes) is taken apart; which option it is, the answer
    // checks (ipv6.p4). Any other (duplicate address detection's, from ::, has no option)
    // is flooded as it is.
    state parse_nd_solicit {
        transition select(hdr.ipv6.payload_len) {
            32:      parse_nd_solicit_option;
            default: accept;
        }
    }

    state parse_nd_solicit_option {
        pkt.extract(hdr.nd_solicit);
        transition accept;
    }

    // As for IPv4: the checks at once, one by one only when they fail.
    state parse_tcp {
        pkt.extract(hdr.l4);
        pkt.extract(hdr.tcp);
        meta.tcp_flags = hdr.tcp.flags;
        meta.checks = (bit<1>)TCP_LENGTH_VALID;
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
    // of its own.
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

control LbDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.icmpv6);
        pkt.emit(hdr.nd_solicit);
        pkt.emit(hdr.l4);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.tcp_mss);
        pkt.emit(hdr.tcp_ts);
        pkt.emit(hdr.udp);
    }
}

#endif
