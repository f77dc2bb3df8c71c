/* Every size of the data plane, in one place: tables, registers and counters, and the widths
 * of the state that holds them. A size that follows from others is written as the
 * expression it follows from. The controller reads table and counter sizes from the
 * P4Info, never from a copy of these numbers. */
#ifndef P4LB_SIZE_P4
#define P4LB_SIZE_P4

// VIPs (address, protocol, port): vip_table and every per-VIP table, counter and register.
// Service id 0 is reserved (not a VIP).
const bit<32> MAX_SERVICES = 256;

// Backend ids are this wide where the data plane stores one: in a connection slot, and as
// a tier's cookie in the low bits of a backend's TCP timestamp (TSval; the server sees
// its echoed TSecr ahead of its own clock by less than 2^(COOKIE_BITS+1) ticks, 1 ms each
// on Linux). Id 0 is reserved (none).
const bit<32> BACKEND_ID_BITS = 10;
// Backends over all VIPs: every per-backend table, counter and register.
const bit<32> MAX_BACKENDS = 32w1 << BACKEND_ID_BITS;
const bit<32> COOKIE_BITS = BACKEND_ID_BITS;

// IP-hash pool members over all VIPs, two versions per VIP (a change is written beside
// the live version, then flipped).
const bit<32> POOL_TABLE_SIZE = 8192;
// Slots over all VIPs, two versions each: a WRR cycle is the sum of the weights (up to
// 1000 each); a Maglev table is a prime >= 100 x the backends (307 for 3, 6421 for 64).
const bit<32> SLOT_TABLE_SIZE = 262144;
// Routes (hosts, prefixes, backends, VIP addresses): each of the IPv4 and IPv6 route tables.
const bit<32> ROUTE_TABLE_SIZE = 1024;
// Controller-installed entries for flows the state buckets could not hold (collisions)
// and, in a tier, for the connections other balancers opened: each of the IPv4 and IPv6
// connection tables (the IPv6 one holds collisions only).
const bit<32> CONN_TABLE_SIZE = 16384;

// Drop reasons (DropReason, defines.p4) per service in the drop counter: room for more
// reasons without changing the counter's layout (DropReason uses 17 of 32).
const bit<32> NUM_DROP_REASONS = 32;
const bit<32> DROP_COUNTER_SIZE = MAX_SERVICES * NUM_DROP_REASONS;

// Per-connection state: CONN_BUCKETS buckets of CONN_WAYS slots, one register entry per
// bucket, so a packet reads and writes its connection state once. 131,072 buckets x 4
// ways = 524,288 slots: with 60,000 live connections a bucket holds 0.46 on average and a
// new flow finds its bucket full with probability ~0.15 % (Poisson tail), against ~60 %
// for a 65,536-entry single-slot table. A power of two: the bucket is the hash's low bits.
const bit<32> CONN_BUCKETS = 131072;
const bit<32> CONN_WAYS = 4;
// A slot's fields (conn_slot_t, defines.p4), from the top: the backend id, the switch
// port it leaves by (port_id_t), the connection's state (conn_state_t), when it expires
// (tick_t), whether a request awaits its answer, and the flow's signature (flow_sig_t).
const bit<32> SLOT_BACKEND_BITS = BACKEND_ID_BITS;
const bit<32> SLOT_PORT_BITS = 9;
const bit<32> SLOT_STATE_BITS = 2;
const bit<32> SLOT_EXPIRY_BITS = 21;      // 1024-us ticks: wraps after ~36 min
const bit<32> SLOT_AWAITING_BITS = 1;
const bit<32> SLOT_SIG_BITS = 32;
const bit<32> CONN_SLOT_BITS = SLOT_BACKEND_BITS + SLOT_PORT_BITS + SLOT_STATE_BITS
                               + SLOT_EXPIRY_BITS + SLOT_AWAITING_BITS + SLOT_SIG_BITS;
const bit<32> CONN_BUCKET_BITS = CONN_WAYS * CONN_SLOT_BITS;

// QoS (qos.p4): ports that can carry a queueing discipline at once, each taking a slot of
// the QoS state; and flow (and host) buckets per slot, the queue's fairness granularity
// (Linux sfq hashes into 1024; a 1,000 pps bottleneck rarely sees more than a few dozen
// flows, and every bucket costs registers on all slots).
const bit<32> QOS_SLOTS = 8;
const bit<32> QOS_BUCKETS = 64;
const bit<32> QOS_STATE_SIZE = QOS_SLOTS * QOS_BUCKETS;

#endif
