/* Headers and the metadata the stages share. */
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
// in TSecr (affinity.p4's COOKIE_BITS).
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

#ifdef P4LB_FORWARDING_ONLY
// baseline.p4's: what plain forwarding parses.
struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
}
#else
struct headers_t {
    ethernet_t     ethernet;
    arp_t          arp;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    l4_ports_t     l4;
    tcp_t          tcp;
#ifndef P4LB_BASELINE
    tcp_mss_t       tcp_mss;
    tcp_timestamp_t tcp_ts;
#endif
    udp_t          udp;
}
#endif

// Sent to the controller when a new flow cannot be kept in the state registers: the
// conn_table entry to write, its key fields then use_backend's parameter, concatenated
// in that order (src_addr 32, dst_addr 32, protocol 8, src_port 16, dst_port 16,
// backend_id 32). One field, not six: p4c's BMv2 back end copies each member of a
// digest into a field of its own, which BMv2 resets for every packet.
struct conn_digest_t {
    bit<136> entry;
}

// Sent to the tier's controller for a VIP whose connections the balancers share (a
// stateful algorithm behind ECMP): a connection opened here (CONN_OPENED), or a
// client's FIN or RST ended it (CONN_CLOSED). The event, then conn_digest_t's layout: the
// controller writes (and later removes) the flow's conn_table entry on every other
// balancer, so whichever one its packets reach next knows its backend.
struct conn_event_t {
    bit<144> event_entry;
}

#if defined(P4LB_FORWARDING_ONLY)
// baseline.p4's: what routing uses. BMv2 resets every metadata field of every packet, so
// plain forwarding must not carry the load balancer's.
struct metadata_t {
    DropReason    drop_reason;
}
#elif defined(P4LB_BASELINE)
// floor.p4's: what the shared parser, checksums and routing use.
struct metadata_t {
    bit<16>       l4_len;
    bit<1>        l4_rewritten;
    bit<8>        tcp_flags;
    DropReason    drop_reason;
    bit<1>        checks;
#ifdef P4LB_FLOOR_META
    P4LB_FLOOR_META                // floor.p4's state fields
#endif
}
#else
struct metadata_t {
    bit<16>       l4_len;        // TCP/UDP length for the pseudo-header
    bit<1>        l4_rewritten;  // recompute TCP/UDP checksums on the way out
    DropReason    drop_reason;
    bit<1>        checks;        // whether the parser's checks pass (parser.p4)
    // VIP lookup
    service_id_t  service_id;    // not 0: the packet is to this VIP
    Algorithm     algorithm;
    version_t     version;
    bit<32>       size;          // the pool's (IPHASH) or the slot table's (the others);
                                 // 32 bits: a hash's modulus, and p4c copies a cast one
    // connection state
    bit<8>        tcp_flags;     // 0 for UDP
    bit<32>       bucket_index;  // the flow's hash, its low 17 bits
    flow_sig_t    sig;           // the flow's hash, then the hash xor the client port
    conn_bucket_t bucket;        // as read; written back once, with this flow's slot updated
    bit<8>        hit_shift;     // 75 * the way holding it (0 if none); for a new
                                 // connection, the way it takes (NO_WAY: bucket full)
    conn_slot_t   slot;          // that way's slot
    bit<2>        flow_status;   // FLOW_UNKNOWN, FLOW_STARTS, FLOW_KNOWN, FLOW_KNOWN_TURNS
    conn_state_t  next_state;    // the slot's state after this packet (CONN_FREE: cleared)
    bit<32>       load;          // a per-backend register as read
    bit<64>       window;        // a packet_window as read, or a LEAST* candidate's cost
    bit<64>       best_cost;     // LEAST*: the lightest candidate's cost so far
    bit<16>       best_weight;   //   and its weight (0: none yet)
    // A counter or register index computed once: p4c gives each index (or written value)
    // expression a PHV field of its own, and BMv2 resets every field for every packet.
    bit<32>       index;
    // selection
    member_index_t member_index;
    backend_id_t  backend_id;
    // QoS (qos.p4): a port's discipline as its table entry gives it, ingress then egress;
    // four fields in all, as BMv2 resets every field of every packet.
    bit<32>       qos_base;      // the port's slot * QOS_BUCKETS
    bit<32>       qos_limit;     // ingress: packets queued toward the port; egress: CoDel target, µs
    bit<32>       qos_shares;    // ingress: per-flow limit 16 | per-host limit 16; egress: CoDel interval, µs
    bit<4>        qos_flags;     // QOS_BY_DST | QOS_POLICED or QOS_CODEL | QOS_SPARSE or QOS_PER_FLOW
}
#endif

#endif
