/* Types, typed constants and sizes shared by every stage. */
#ifndef P4LB_DEFINES_P4
#define P4LB_DEFINES_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_id_t;
typedef bit<16> service_id_t;   // one VIP = (address, protocol, port); 0 = not a VIP
typedef bit<16> backend_id_t;   // global backend id; 0 = none
typedef bit<16> member_index_t; // position in a pool or a WRR slot table
typedef bit<8>  algorithm_t;
typedef bit<8>  drop_reason_t;
typedef bit<1>  version_t;      // which copy of a VIP's pool/slots is live

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ARP_OP_REQUEST = 1;
const bit<16> ARP_OP_REPLY   = 2;
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;

const bit<8> TCP_FLAG_FIN = 0x01;
const bit<8> TCP_FLAG_SYN = 0x02;
const bit<8> TCP_FLAG_RST = 0x04;
const bit<8> TCP_FLAG_ACK = 0x10;

// Algorithms a VIP can use; the controller picks one per VIP at run time.
const algorithm_t ALGO_IPHASH = 0;  // 5-tuple hash modulo the pool size (the paper's baseline)
const algorithm_t ALGO_WRR    = 1;  // smooth weighted round robin over controller-written slots

// Drop reasons: index into the drop counter together with the service id.
const drop_reason_t DROP_NONE             = 0;
const drop_reason_t DROP_MALFORMED        = 1;  // parser error: truncated, bad IHL/version/offset
const drop_reason_t DROP_BAD_CHECKSUM     = 2;  // IPv4 header checksum does not verify
const drop_reason_t DROP_TTL_EXPIRED      = 3;
const drop_reason_t DROP_VIP_PORT_UNKNOWN = 4;  // VIP address, but no VIP on that protocol/port
const drop_reason_t DROP_NO_ROUTE         = 5;
const drop_reason_t DROP_NO_BACKEND       = 6;  // VIP pool empty or backend unknown
const drop_reason_t DROP_FRAGMENT         = 7;  // IP fragment sent to a VIP: no L4 header to balance on
const drop_reason_t DROP_UNSUPPORTED      = 8;  // neither IPv4 nor ARP
// Room for more reasons without changing the counter layout.
const bit<32> NUM_DROP_REASONS = 16;

// Sizes. Each is a named constant so the controller can read them from the P4Info.
const bit<32> MAX_SERVICES = 256;          // VIPs (address, protocol, port); id 0 is reserved
const bit<32> MAX_BACKENDS = 1024;         // backends over all VIPs; id 0 is reserved
const bit<32> POOL_TABLE_SIZE = 8192;      // IP-hash pool members, two versions per VIP
const bit<32> WRR_TABLE_SIZE = 65536;      // WRR slots, two versions per VIP (weights up to 1000)
const bit<32> ROUTE_TABLE_SIZE = 1024;
const bit<32> CONN_TABLE_SIZE = 16384;     // controller-installed entries for colliding flows
// Per-connection state kept by the data plane: at least 65,536 concurrent connections.
const bit<32> CONN_STATE_SIZE = 65536;
const bit<32> DROP_COUNTER_SIZE = 4096;    // MAX_SERVICES * NUM_DROP_REASONS

// Ages are in ticks of 1024 us (ingress timestamp >> 10).
const bit<32> CONN_IDLE_TICKS = 120000;    // ~123 s without a packet: the state is free again
const bit<32> CONN_CLOSING_TICKS = 4000;   // ~4 s after a FIN: long enough for the last ACKs
const bit<16> CONN_CLOSING_FLAG = 0x8000;  // top bit of the stored backend id

const bit<16> FLOOD_MCAST_GROUP = 1;       // all ports; the controller programs it

#endif
