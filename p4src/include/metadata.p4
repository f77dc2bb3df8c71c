/* What lb.p4's stages share: the headers it parses, the digests it sends the controller
 * and its per-packet metadata. */
#ifndef P4LB_METADATA_P4
#define P4LB_METADATA_P4

struct headers_t {
    ethernet_t      ethernet;
    arp_t           arp;
    ipv4_t          ipv4;
    ipv4_options_t  ipv4_options;
    ipv6_t          ipv6;
    icmpv6_t        icmpv6;
    nd_solicit_t    nd_solicit;
    l4_ports_t      l4;
    tcp_t           tcp;
    tcp_mss_t       tcp_mss;
    tcp_timestamp_t tcp_ts;
    udp_t           udp;
}

// Sent to the controller when a new flow cannot be kept in the state registers: the
// conn_table entry to write, its key fields then use_backend's parameter, concatenated
// in that order (src_addr 32, dst_addr 32, protocol 8, src_port 16, dst_port 16,
// backend_id 32). One field, not six: p4c's BMv2 back end copies each member of a
// digest into a field of its own.
struct conn_digest_t {
    bit<136> entry;
}

// The same for an IPv6 flow: ipv6.p4's conn6_table entry to write, its key fields then
// use_backend6's parameters (src_addr 128, dst_addr 128, next header 8, src_port 16,
// dst_port 16, backend_id 32, switch_port 9).
struct conn6_digest_t {
    bit<337> entry;
}

// Sent to the tier's controller for a VIP whose connections the balancers share (a
// stateful algorithm behind ECMP): a connection opened here (CONN_OPENED), or a
// client's FIN or RST ended it (CONN_CLOSED), at its slot or through a copy. The event,
// then conn_digest_t's layout: the controller writes (and later removes) the flow's
// conn_table entry on every other balancer, so whichever one its packets reach next knows
// its backend.
// One type per digest() call, all of one layout: p4c gives each call a BMv2 learn list
// named after its type, and P4Runtime configures and acknowledges a digest by that name,
// which reaches one list of a name. A list never acknowledged keeps every sample it sent
// and drops any equal one for ever: the next connection of a reused 5-tuple on the same
// backend would go unreported.
struct conn_opened_t {
    bit<144> event_entry;
}
struct conn_closed_t {
    bit<144> event_entry;
}
struct copy_closed_t {
    bit<144> event_entry;
}
// The same three for an IPv6 connection: the event, then conn6_digest_t's layout
// (ipv6.p4's conn6_table copy: its key, the backend id and the port it leaves by).
struct conn6_opened_t {
    bit<345> event_entry;
}
struct conn6_closed_t {
    bit<345> event_entry;
}
struct copy6_closed_t {
    bit<345> event_entry;
}

// Several fields hold more than one thing, one at a time: each field costs every packet
// (lb.p4), so a stage that needs scratch space reuses one that is free by then, under a
// name that says what it holds there (qos.p4's QOS_* names, for instance).
struct metadata_t {
    bit<16>       l4_len;        // TCP/UDP length for the pseudo-header
    bit<1>        l4_rewritten;  // recompute TCP/UDP checksums on the way out
    DropReason    drop_reason;
    bit<1>        checks;        // whether the parser's checks pass (checks.p4)
    // VIP lookup
    service_id_t  service_id;    // not 0: the packet is to this VIP
    Algorithm     algorithm;
    version_t     version;
    bit<32>       size;          // the pool's (IPHASH) or the slot table's (the others);
                                 // 32 bits: a hash's modulus, and p4c copies a cast one
    // connection state
    bit<8>        tcp_flags;     // 0 for UDP
    bit<32>       bucket_index;  // the flow's hash, its low bits (CONN_BUCKETS)
    flow_sig_t    sig;           // the flow's hash, then the hash xor the client port
    conn_bucket_t bucket;        // as read; written back once, with this flow's slot updated
    bit<8>        hit_shift;     // CONN_SLOT_BITS x the way holding it (0 if none); for a
                                 // new connection, the way it takes (NO_WAY: bucket full)
    conn_slot_t   slot;          // that way's slot
    bit<2>        flow_status;   // FLOW_UNKNOWN, FLOW_STARTS, FLOW_KNOWN, FLOW_KNOWN_TURNS
    conn_state_t  next_state;    // the slot's state after this packet (CONN_FREE: cleared)
    bit<32>       load;          // a per-backend register as read
    bit<64>       window;        // a packet_window as read, or a LEAST* candidate's cost
    bit<64>       best_cost;     // LEAST*: the lightest candidate's cost so far
    bit<16>       best_weight;   //   and its weight (0: none yet)
    // A counter or register index computed once: p4c gives each index (or written value)
    // expression a PHV field of its own.
    bit<32>       index;
    // selection
    member_index_t member_index;
    backend_id_t  backend_id;
    // QoS (qos.p4): a port's discipline as its table entry gives it, ingress then egress.
    bit<32>       qos_base;      // the port's slot * QOS_BUCKETS
    // ingress: packets queued toward the port; egress: CoDel target, µs
    bit<32>       qos_limit;
    // ingress: per-flow limit 16 | per-host limit 16; egress: CoDel interval, µs
    bit<32>       qos_shares;
    // QOS_BY_DST | QOS_POLICED or QOS_CODEL | QOS_SPARSE or QOS_PER_FLOW | QOS_ADMITTED
    bit<4>        qos_flags;
}

#endif
