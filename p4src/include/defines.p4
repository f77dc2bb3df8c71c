/* Types and typed constants shared by every stage (the sizes are size.p4's). */
#ifndef P4LB_DEFINES_P4
#define P4LB_DEFINES_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<9>  port_id_t;
// Ids are 32 bits wide although far fewer are used: a register or counter index is 32
// bits, and a narrower id would cost a copy (a PHV field BMv2 resets per packet) at each use.
typedef bit<32> service_id_t;   // one VIP = (address, protocol, port); 0 = not a VIP
typedef bit<32> backend_id_t;   // global backend id; 0 = none
typedef bit<16> member_index_t; // position in a VIP's pool or slot table
typedef bit<1>  version_t;      // which copy of a VIP's pool/slots is live

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<16> ARP_OP_REQUEST = 1;
const bit<16> ARP_OP_REPLY   = 2;
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<8>  IP_PROTO_ICMPV6 = 58;
// IPv6 extension headers (RFC 8200 4, RFC 7045): hop-by-hop options, routing, fragment,
// destination options, authentication, mobility, HIP, shim6.
const bit<8>  IPV6_HOP_BY_HOP = 0;
const bit<8>  IPV6_ROUTING    = 43;
const bit<8>  IPV6_FRAGMENT   = 44;
const bit<8>  IPV6_DEST_OPTS  = 60;
const bit<8>  IPV6_AUTH       = 51;
const bit<8>  IPV6_MOBILITY   = 135;
const bit<8>  IPV6_HIP        = 139;
const bit<8>  IPV6_SHIM6      = 140;

// ICMPv6 neighbour discovery (RFC 4861): router solicitation and advertisement,
// neighbour solicitation and advertisement, redirect. Its messages are sent with a hop
// limit of 255, which no router can have forwarded; a receiver discards any other.
const bit<8>  ND_ROUTER_SOLICIT   = 133;
const bit<8>  ND_ROUTER_ADVERT    = 134;
const bit<8>  ND_NEIGHBOR_SOLICIT = 135;
const bit<8>  ND_NEIGHBOR_ADVERT  = 136;
const bit<8>  ND_REDIRECT         = 137;
const bit<8>  ND_HOP_LIMIT        = 255;
const bit<8>  ND_OPT_SOURCE_LLADDR = 1;
const bit<8>  ND_OPT_TARGET_LLADDR = 2;
const bit<32> ND_FLAGS_SOLICITED_OVERRIDE = 0x60000000;  // an advertisement's S and O
// Link-scope multicast, ff02::/16 (RFC 4291 2.7): the link's own traffic (multicast
// listener reports, RFC 3810, are sent to it with hop limit 1), flooded, never routed.
const bit<16> IPV6_LINK_SCOPE_MULTICAST = 0xff02;

const bit<8> TCP_FLAG_FIN = 0x01;
const bit<8> TCP_FLAG_SYN = 0x02;
const bit<8> TCP_FLAG_RST = 0x04;
const bit<8> TCP_FLAG_PSH = 0x08;
const bit<8> TCP_FLAG_ACK = 0x10;
const bit<8> TCP_FLAG_URG = 0x20;

// TCP options before the timestamp, as Linux sends them (first 32 bits after the header):
// NOP NOP TS (data segments); SACK-permitted TS (SYN, SYN-ACK, after an MSS option).
const bit<32> TCP_OPT_NOP_NOP_TS = 0x0101080a;
const bit<32> TCP_OPT_SACKOK_TS  = 0x0402080a;
const bit<16> TCP_OPT_MSS        = 0x0204;

// Algorithms a VIP can use; the controller picks one per VIP at run time (set_vip's
// parameter), and reads the names and codes from the P4Info's serializable enums.
// Every algorithm but IPHASH picks a slot of the VIP's slot table, which the controller
// fills for that algorithm.
enum bit<8> Algorithm {
    IPHASH  = 0,  // 5-tuple hash modulo the pool size (the paper's baseline)
    WRR     = 1,  // smooth weighted round robin: the next slot, per VIP
    SRCHASH = 2,  // source-address hash into weighted buckets (nginx ip_hash, PCC)
    MAGLEV  = 3,  // 5-tuple hash into a weighted Maglev lookup table
    // The 5-tuple hash picks a slot of up to 16 candidates (set_candidates): every active
    // backend (exact), or d drawn from weighted buckets (power of d choices, distinct when
    // the VIP has d backends or more); the least loaded by the algorithm's measure, over
    // its weight, wins. The VIP's `choices` setting decides which.
    LEASTCONN = 4,  // active (established, not yet closed) connections
    LEASTTIME = 5,  // (active connections + 1) x the backend's mean response time
    LEASTPKT  = 6   // packets sent to the backend in the last one to two seconds
}

// Why a packet was dropped: with the service id, the index of the drop counter (at most
// NUM_DROP_REASONS reasons, size.p4).
// The controller reads the names from the P4Info (drop_table's key).
enum bit<8> DropReason {
    NONE             = 0,
    MALFORMED        = 1,   // parser error: truncated, bad version/IHL, bad TCP data
                            // offset, neighbour discovery with a hop limit other than 255
    BAD_CHECKSUM     = 2,   // IPv4 header checksum does not verify
    TTL_EXPIRED      = 3,   // IPv4 TTL or IPv6 hop limit 0 or 1
    VIP_PORT_UNKNOWN = 4,   // VIP address, but no VIP on that protocol/port
    NO_ROUTE         = 5,
    NO_BACKEND       = 6,   // VIP pool empty or backend unknown
    FRAGMENT         = 7,   // IP fragment sent to a VIP: no L4 header to balance on
    UNSUPPORTED      = 8,   // neither IPv4, IPv6 nor ARP
    BAD_TCP_FLAGS    = 9,   // flag sets no stack sends: SYN+FIN, SYN+RST, null, xmas
    MARTIAN_SOURCE   = 10,  // source 0/8, 127/8, multicast, 240/4 (broadcast), a VIP, or dst;
                            // IPv6: ::, ::1, ::ffff:0:0/96, multicast ff00::/8, or dst;
                            // toward a VIP: a VIP, or link-local fe80::/10
    BAD_LENGTH       = 11,  // IPv4 total length or IPv6 payload length longer than the
                            // frame, or shorter than the headers
    NO_STATE         = 12,  // mid-connection packet of a stateful VIP with no state to follow
    // QoS (qos.p4), on a port with a queueing discipline:
    QOS_TAIL         = 13,  // the port's, its flow's or its host's queue share is full
    QOS_AQM          = 14,  // CoDel dropped it at dequeue (sojourn above target too long)
    QOS_METER        = 15,  // its class is over its rate (PCQ's per-address meter)
    EXTENSION_HEADER = 16   // IPv6 to a VIP with an extension header before its TCP/UDP
}

// A connection event digest's event (its top 8 bits: metadata.p4's conn_opened_t and the others).
const bit<8> CONN_OPENED = 1;
const bit<8> CONN_CLOSED = 2;

// Per-connection state (affinity.p4): a bucket of CONN_WAYS slots, one register entry.
// A slot's fields, from the top: backend id | switch port | state | expiry tick | awaiting
// | signature (their widths: size.p4). The signature is the flow's hash xor its client
// port: with the bucket index (the hash's low bits) two flows share both only if they have
// the same client port and the same hash (CONN_LOOKUP). It sits at the bottom, the fields
// a packet changes (state, expiry, awaiting) together above it: the checks and the write
// back cost the fewest operations. Awaiting: the client sent data the backend has not
// yet answered (a request, for the response time LEASTTIME balances on). The switch
// port is where the backend was attached when the connection began: a known connection's
// packet leaves by it without a table lookup (the NAT rewrite happens in the egress).
typedef bit<(CONN_BUCKET_BITS)> conn_bucket_t;
typedef bit<(CONN_SLOT_BITS)>   conn_slot_t;
typedef bit<(SLOT_SIG_BITS)>    flow_sig_t;
typedef bit<(SLOT_EXPIRY_BITS)> tick_t;  // wraps after 2^21 ticks (~36 min)
typedef bit<(SLOT_STATE_BITS)>  conn_state_t;
const conn_state_t CONN_FREE        = 0;
const conn_state_t CONN_EMBRYONIC   = 1;   // SYN seen, the client has not ACKed yet
const conn_state_t CONN_ESTABLISHED = 2;   // the client ACKed (TCP) or any UDP flow
const conn_state_t CONN_CLOSING     = 3;   // the client sent FIN

// What the connection state knows of a packet's flow (metadata flow_status). One field
// for both facts: BMv2 resets every field for every packet.
const bit<2> FLOW_UNKNOWN = 0;             // no live slot: a new flow, or one to drop
const bit<2> FLOW_STARTS = 1;              // unknown, and its packet may start a connection
const bit<2> FLOW_KNOWN = 2;               // a live slot names its backend and port
const bit<2> FLOW_KNOWN_TURNS = 3;         // known, and this packet establishes or ends it

// Time is in ticks of 1024 us (ingress timestamp >> 10). A slot stores when it expires,
// set by its state (the *_TICKS below), like conntrack's SYN_SENT, established and FIN
// timeouts: a half-open connection cannot squat a slot for long. A slot is live while
// its expiry is at most CONN_IDLE_TICKS ahead of now; once past, the difference wraps
// far beyond that (a long-dead slot looks live again for ~2 min every ~36 min: it can
// only waste that slot, not misroute another flow).
// Now, in ticks: an expression wherever it is used, not a field (a field costs a write
// per packet, and BMv2 resets every field of every packet).
#define NOW (std_meta.ingress_global_timestamp[30:10])
const tick_t CONN_EMBRYONIC_TICKS = 3000;  // ~3 s for the client's ACK after its SYN
const tick_t CONN_IDLE_TICKS = 120000;     // ~123 s without a packet
const tick_t CONN_CLOSING_TICKS = 4000;    // ~4 s after a FIN: long enough for the last ACKs
// An established connection's packets write its slot (a new expiry) at most this often,
// unless they change it otherwise (or, on a LEASTTIME VIP, carry a request): most
// packets of a busy connection only read it.
const tick_t CONN_REFRESH_TICKS = 1000;    // ~1 s

// Per-backend load, for the LEAST* algorithms. Response time: a moving average (gain 1/8)
// in sixteenths of a tick of the time from the client's last packet of a request to the
// backend's first pushed segment of its answer. Packets: counted in windows of
// 2^PKT_WINDOW_BITS ticks (~1 s); the load is the current window plus the previous one.
const bit<32> RT_SCALE = 16;
const bit<5>  PKT_WINDOW_BITS = 10;

const bit<16> FLOOD_MCAST_GROUP = 1;       // all ports; the controller programs it

#endif
