/* The headers p4lb's programs parse, as they are on the wire, and the fields each of
 * their checksums covers. Which of them a program parses, and its metadata, are its own
 * (lb.p4's: metadata.p4). */
#ifndef P4LB_HEADERS_P4
#define P4LB_HEADERS_P4

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sha;
    ipv4_addr_t spa;
    mac_addr_t  tha;
    ipv4_addr_t tpa;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// Up to 40 bytes of options (IHL 6..15), kept so the header checksum covers them.
header ipv4_options_t {
    varbit<320> options;
}

// The fixed IPv6 header (RFC 8200). What follows it (next_hdr): TCP, UDP or ICMPv6 is
// parsed; an extension header, or anything else, is carried as it is (checks.p4).
header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

// The first four bytes of an ICMPv6 message right after the fixed IPv6 header: its type
// says whether it is neighbour discovery (ND_*, defines.p4).
header icmpv6_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

// A neighbour solicitation after its ICMPv6 header (RFC 4861 4.3) with one option, the
// asker's link-layer address (4.6.1), as a host sends one: the address asked for, and the
// option, which an answer for a VIP (ipv6.p4) turns in place into the advertisement's
// target link-layer address. One header, not two: BMv2 resets each header of the program
// for every packet.
header nd_solicit_t {
    bit<32>     reserved;     // an advertisement's flags (R, S, O) in the first 3 bits
    ipv6_addr_t target;
    bit<8>      opt_type;     // ND_OPT_SOURCE_LLADDR, to answer; ND_OPT_TARGET_LLADDR
    bit<8>      opt_length;   // in units of 8 bytes: 1 for Ethernet
    mac_addr_t  lladdr;
}

// The transport ports, first in TCP and UDP alike: one header for both, so the stages
// read them where the parser put them (a copy into metadata costs a parser operation and
// a PHV field, reset for every packet). A table keyed on them sees 0 when neither
// header was parsed (BMv2 matches an invalid header's fields as 0), as no service port is.
header l4_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

// TCP after its ports (l4_ports_t).
header tcp_t {
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

// The TCP timestamp option (RFC 7323) as Linux lays it out, with the two bytes before it:
// NOP NOP (data segments) or SACK-permitted (SYN and SYN-ACK, after MSS). A tier's
// balancer writes its cookie into the low bits of a backend's TSval; the client echoes it
// in TSecr (COOKIE_BITS, size.p4).
header tcp_timestamp_t {
    bit<16> prefix;
    bit<8>  kind;
    bit<8>  length;
    bit<32> tsval;
    bit<32> tsecr;
}

// The MSS option of a SYN or SYN-ACK, parsed only when the timestamp follows it.
header tcp_mss_t {
    bit<32> option;
}

// UDP after its ports (l4_ports_t).
header udp_t {
    bit<16> length;
    bit<16> checksum;
}

// The fields each checksum covers, named `hdr` and `meta` as every p4lb program names its
// headers and metadata (meta.l4_len: the TCP/UDP length the pseudo-header carries). One
// list for IPv4 with and without options, one for TCP with and without the timestamp and
// MSS options: BMv2 leaves an invalid header's fields out of a checksum's input
// (bm_sim/calculations.cpp), so a list names every header that may be there.
#define IPV4_HEADER \
    hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
    hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4_options.options
// TCP's pseudo-header and header, then the options a program parses (the timestamp's).
#define TCP_PSEUDO_AND_HEADER \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len, \
    hdr.l4.src_port, hdr.l4.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no, \
    hdr.tcp.data_offset, hdr.tcp.res, hdr.tcp.flags, hdr.tcp.window, hdr.tcp.urgent_ptr
#define TCP_TIMESTAMP \
    hdr.tcp_ts.prefix, hdr.tcp_ts.kind, hdr.tcp_ts.length, hdr.tcp_ts.tsval, hdr.tcp_ts.tsecr
#define UDP_PSEUDO_AND_HEADER \
    hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, meta.l4_len, \
    hdr.l4.src_port, hdr.l4.dst_port, hdr.udp.length

#endif
