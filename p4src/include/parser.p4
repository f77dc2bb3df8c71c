/* Parser and deparser: Ethernet, ARP, IPv4 (with options), TCP, UDP. */
#ifndef P4LB_PARSER_P4
#define P4LB_PARSER_P4

error {
    IPv4BadVersion,
    IPv4BadIHL,
    IPv4BadTotalLen,
    TcpBadDataOffset
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

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.IPv4BadIHL);
        verify(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) << 2, error.IPv4BadTotalLen);
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

    // Only a first fragment (offset 0) carries the L4 header.
    state parse_l4 {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_TCP): parse_tcp;
            (0, IP_PROTO_UDP): parse_udp;
            default:           accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        verify(hdr.tcp.data_offset >= 5, error.TcpBadDataOffset);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
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
        pkt.emit(hdr.udp);
    }
}

#endif
