/* QoS: queueing disciplines on egress ports the controller names (`p4lb qos set`).
 *
 * BMv2 (behavioral-model 1.15.5, targets/simple_switch + bm_sim/queueing.h) gives each
 * egress port up to `--priority-queues` FIFO queues, each with its own packet-rate shaper
 * and depth (Thrift: set_queue_rate / set_queue_depth PORT PRIORITY); the departure time
 * of a packet is fixed when it is enqueued, so queues never share a port rate, and the
 * egress thread takes the highest-priority queue whose head is due (strict priority).
 * With no shared port shaper, spreading flows over priority queues cannot be both fair
 * and work-conserving. So every discipline here shapes one queue (priority 0) at the port
 * rate and gets its fairness from admission and dropping in P4:
 *   - a port limit (tail drop, counted: the traffic manager's own drops are invisible to
 *     P4, so the controller sets its depth above this limit);
 *   - per-flow and per-host occupancy caps (a flow or host holding its cap of the queue
 *     loses its next packet: service shares follow queue shares in a FIFO);
 *   - sparse flows first: a packet whose flow has nothing queued goes to priority 1;
 *   - a per-class packet meter (PCQ's per-address rate; a policer, not a shaper);
 *   - CoDel at egress on deq_timedelta, per port or per flow bucket (P4-CoDel style: at
 *     most one drop per dequeued packet, interval/sqrt(count) from a lookup table).
 * A port without a discipline misses qos_port_table at ingress; at egress one condition
 * (the packet was not admitted) skips everything. An admitted packet releases its place
 * with what the ingress gave it (slot, classifier), so releases always match admissions,
 * whatever the controller changes meanwhile. */
#ifndef P4LB_QOS_P4
#define P4LB_QOS_P4

// QOS_SLOTS ports can carry a discipline at once, each taking a slot of the state below,
// with QOS_BUCKETS flow (and host) buckets per slot (size.p4).
// The queue hash is CRC-16 (the balancer's is CRC-32): independent of the backend choice.
const bit<3>  QOS_BULK_QUEUE = 0;     // BMv2 priority 0: the shaped port queue
const bit<3>  QOS_SPARSE_QUEUE = 1;   // BMv2 priority 1: flows with nothing queued
// meta.qos_flags
const bit<4>  QOS_BY_DST = 1;         // host = destination address (else source)
const bit<4>  QOS_POLICED = 2;        // ingress: the per-class meter applies
const bit<4>  QOS_SPARSE = 4;         // ingress: flows with nothing queued go first
const bit<4>  QOS_ADMITTED = 8;       // ingress -> egress: the packet holds a place
const bit<4>  QOS_PER_FLOW = 4;       // egress: CoDel state per flow bucket (else per port)

// Every register is indexed by slot * QOS_BUCKETS (+ bucket): an index is a field, never
// an expression (p4c gives each index expression a field of its own, which BMv2 resets
// for every packet). The per-port cells use index slot * QOS_BUCKETS only.
// Packets admitted toward a slot's port and not yet dequeued: all, per flow bucket and
// per host bucket. +1 at ingress, -1 at egress (the data plane's own state).
register<bit<32>>(QOS_STATE_SIZE) qos_backlog;
register<bit<16>>(QOS_STATE_SIZE) qos_flow_backlog;
register<bit<16>>(QOS_STATE_SIZE) qos_host_backlog;
// PCQ's per-class rate, per (slot, host bucket); the controller sets every index's rate.
@name(".qos_class_rate")
meter(QOS_STATE_SIZE, MeterType.packets) qos_class_rate;
// CoDel state per (slot, bucket) (bucket 0 for a per-port CoDel). Times: the time the
// sojourn has been above target for an interval (first_above, 0: below target) in the
// top 32 bits, the next drop's time in the low 32 (µs). State: the drop count in the top
// 16 bits, bit 0 set while dropping.
register<bit<64>>(QOS_STATE_SIZE) codel_times;
register<bit<32>>(QOS_STATE_SIZE) codel_state;
// Per port, for measurement (read over Thrift by bench/qos.py): the sum of deq_timedelta
// (µs each packet spent queued, rate limiter included) and the packets it sums.
register<bit<64>>(QOS_STATE_SIZE) qos_sojourn_us;
register<bit<64>>(QOS_STATE_SIZE) qos_dequeued;

// No locals and no fields of QoS's own: every field costs every packet (lb.p4), so QoS
// works in the balancer's fields, which neither the rest of the ingress nor the egress
// reads by then (the egress's connection events write theirs before reading them), under
// these names.
// The flow bucket and host bucket as register indexes (slot base + bucket), computed at
// the end of the ingress and carried to the egress.
#define QOS_FLOW (meta.bucket_index)
#define QOS_HOST (meta.sig)
// Ingress: the address that names the packet's host, the backlogs as read (the port's,
// its flow bucket's, its host bucket's) and the meter's colour.
#define QOS_HOST_ADDR meta.size
#define QOS_PORT_QUEUED meta.load
#define QOS_FLOW_QUEUED meta.best_weight
#define QOS_HOST_QUEUED meta.member_index
#define QOS_COLOR meta.hit_shift
// Egress: a 16-bit backlog as read; a 64-bit sum as read.
#define QOS_QUEUED meta.best_weight
#define QOS_SUM meta.window
// Egress, CoDel: the state's index, its times (first_above ++ drop_next) and state (count
// ++ .. ++ dropping) as read, and what to do (1: ok to drop, 3: drop this packet).
#define CODEL_INDEX meta.size
#define CODEL_TIMES meta.window
#define CODEL_STATE meta.load
#define CODEL_VERDICT meta.hit_shift
// The flow's addresses and protocol, either family's, in fields free here: an IPv4
// packet's as they are, an IPv6 packet's addresses folded to 32 bits (their four words
// XORed). The source doubles as the host address, the destination replacing it for a
// classifier by destination.
#define QOS_SRC QOS_HOST_ADDR
#define QOS_DST QOS_PORT_QUEUED
#define QOS_PROTO QOS_COLOR
#define FOLD128(a) (a[127:96] ^ a[95:64] ^ a[63:32] ^ a[31:0])
// p4c copies each element of a hash's field list into a field of its own (BMv2 resets
// every one for every packet): one concatenation each, of fields every packet has anyway.
#define QOS_BUCKET_HASHES() \
    if (hdr.ipv6.isValid()) { \
        QOS_SRC = FOLD128(hdr.ipv6.src_addr); \
        QOS_DST = FOLD128(hdr.ipv6.dst_addr); \
        QOS_PROTO = hdr.ipv6.next_hdr; \
    } else { \
        QOS_SRC = hdr.ipv4.src_addr; \
        QOS_DST = hdr.ipv4.dst_addr; \
        QOS_PROTO = hdr.ipv4.protocol; \
    } \
    hash(QOS_FLOW, HashAlgorithm.crc16, meta.qos_base, { QOS_SRC ++ QOS_DST ++ QOS_PROTO \
         ++ hdr.l4.src_port ++ hdr.l4.dst_port }, QOS_BUCKETS); \
    if (meta.qos_flags & QOS_BY_DST != 0) { \
        QOS_HOST_ADDR = QOS_DST; \
    } \
    hash(QOS_HOST, HashAlgorithm.crc16, meta.qos_base, { QOS_HOST_ADDR }, QOS_BUCKETS)

control QosEnqueue(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t std_meta) {
    // The port's discipline as admission rules: its slot, its limit (packets queued), the
    // per-flow and per-host shares of that queue, and the flags (host classifier, the
    // per-class meter, sparse flows first).
    @name(".qos_admit")
    action admit(bit<32> slot, bit<32> limit, bit<16> per_flow, bit<16> per_host,
                 bit<4> flags) {
        meta.qos_base = slot * QOS_BUCKETS;
        meta.qos_limit = limit;
        meta.qos_shares = per_flow ++ per_host;
        meta.qos_flags = flags;
    }

    // Matches the port a packet leaves by (egress_spec). Hit: the port has a discipline
    // (admit). Miss: nothing. The controller writes one entry per port with a discipline.
    @name(".qos_port_table")
    table qos_port_table {
        key = { std_meta.egress_spec: exact @name("port"); }
        actions = { admit; @defaultonly NoAction; }
        const default_action = NoAction();
        size = QOS_SLOTS;
    }

    apply {
        if (qos_port_table.apply().hit) {
            QOS_BUCKET_HASHES();
            qos_backlog.read(QOS_PORT_QUEUED, meta.qos_base);
            qos_flow_backlog.read(QOS_FLOW_QUEUED, QOS_FLOW);
            qos_host_backlog.read(QOS_HOST_QUEUED, QOS_HOST);
            QOS_COLOR = V1MODEL_METER_COLOR_GREEN;
            if (meta.qos_flags & QOS_POLICED != 0) {
                qos_class_rate.execute_meter(QOS_HOST, QOS_COLOR);
            }
            if (QOS_COLOR == V1MODEL_METER_COLOR_RED) {
                meta.drop_reason = DropReason.QOS_METER;
                COUNT_DROP();
            } else if (QOS_PORT_QUEUED >= meta.qos_limit
                       || QOS_FLOW_QUEUED >= meta.qos_shares[31:16]
                       || QOS_HOST_QUEUED >= meta.qos_shares[15:0]) {
                meta.drop_reason = DropReason.QOS_TAIL;
                COUNT_DROP();
            } else {
                // Each count re-read and written in one step: p4c makes consecutive
                // statements one action, and BMv2 locks a register array for an action's
                // duration, so the egress threads' releases are never lost.
                qos_backlog.read(QOS_PORT_QUEUED, meta.qos_base);
                QOS_PORT_QUEUED = QOS_PORT_QUEUED + 1;
                qos_backlog.write(meta.qos_base, QOS_PORT_QUEUED);
                qos_flow_backlog.read(QOS_FLOW_QUEUED, QOS_FLOW);
                QOS_FLOW_QUEUED = QOS_FLOW_QUEUED + 1;
                qos_flow_backlog.write(QOS_FLOW, QOS_FLOW_QUEUED);
                qos_host_backlog.read(QOS_HOST_QUEUED, QOS_HOST);
                QOS_HOST_QUEUED = QOS_HOST_QUEUED + 1;
                qos_host_backlog.write(QOS_HOST, QOS_HOST_QUEUED);
                meta.qos_flags = meta.qos_flags | QOS_ADMITTED;
                // Its flow had nothing queued: the sparse queue, ahead of the backlog.
                if (meta.qos_flags & QOS_SPARSE != 0 && QOS_FLOW_QUEUED == 1) {
                    std_meta.priority = QOS_SPARSE_QUEUE;
                } else {
                    std_meta.priority = QOS_BULK_QUEUE;
                }
            }
        }
    }
}

control QosDequeue(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t std_meta) {
    // The port's AQM: CoDel (per port or per flow bucket) with its target and interval.
    @name(".qos_codel")
    action codel(bit<4> flags, bit<32> target_us, bit<32> interval_us) {
        meta.qos_flags = flags;
        meta.qos_limit = target_us;
        meta.qos_shares = interval_us;
    }

    // Matches the port an admitted packet leaves by. Hit: the port has CoDel (codel).
    // Miss: nothing more. The controller writes it for codel, fq_codel-approx and
    // cake-approx ports.
    @name(".qos_egress_table")
    table qos_egress_table {
        key = { std_meta.egress_port: exact @name("port"); }
        actions = { codel; @defaultonly NoAction; }
        const default_action = NoAction();
        size = QOS_SLOTS;
    }

    // CoDel's control law, interval / sqrt(count), as interval * (65536 / sqrt(count)) >> 16
    // into meta.index (which held the count).
    action next_drop_in(bit<32> inverse_sqrt) {
        meta.index = (bit<32>)(((bit<64>)meta.qos_shares * (bit<64>)inverse_sqrt) >> 16);
    }

    // Matches the drop count (ternary): exact for 1..15, then per power of two at the
    // range's geometric middle. Constant: the square root CoDel needs, as a lookup.
    table codel_law {
        key = { meta.index: ternary @name("count"); }
        actions = { next_drop_in; }
        const default_action = next_drop_in(256);
        const entries = {
            1 &&& 0xffffffff : next_drop_in(65536);
            2 &&& 0xffffffff : next_drop_in(46341);
            3 &&& 0xffffffff : next_drop_in(37837);
            4 &&& 0xffffffff : next_drop_in(32768);
            5 &&& 0xffffffff : next_drop_in(29309);
            6 &&& 0xffffffff : next_drop_in(26755);
            7 &&& 0xffffffff : next_drop_in(24770);
            8 &&& 0xffffffff : next_drop_in(23170);
            9 &&& 0xffffffff : next_drop_in(21845);
            10 &&& 0xffffffff : next_drop_in(20724);
            11 &&& 0xffffffff : next_drop_in(19760);
            12 &&& 0xffffffff : next_drop_in(18919);
            13 &&& 0xffffffff : next_drop_in(18176);
            14 &&& 0xffffffff : next_drop_in(17515);
            15 &&& 0xffffffff : next_drop_in(16921);
            16 &&& 0xfffffff0 : next_drop_in(13777);   // 16..31: 65536 / sqrt(22.6)
            32 &&& 0xffffffe0 : next_drop_in(9742);
            64 &&& 0xffffffc0 : next_drop_in(6889);
            128 &&& 0xffffff80 : next_drop_in(4871);
            256 &&& 0xffffff00 : next_drop_in(3444);
            512 &&& 0xfffffe00 : next_drop_in(2436);
            1024 &&& 0xfffffc00 : next_drop_in(1722);
            2048 &&& 0xfffff800 : next_drop_in(1218);
            4096 &&& 0xfffff000 : next_drop_in(861);
            8192 &&& 0xffffe000 : next_drop_in(609);
            16384 &&& 0xffffc000 : next_drop_in(431);
            32768 &&& 0xffff8000 : next_drop_in(304);
        }
    }

    apply {
        if (meta.qos_flags & QOS_ADMITTED != 0) {
            // Release the packet's place (the buckets its ingress computed): port, flow and
            // host counts, never below zero (a slot's counts are reset when a port gets a
            // discipline).
            qos_backlog.read(QOS_PORT_QUEUED, meta.qos_base);
            QOS_PORT_QUEUED = QOS_PORT_QUEUED - (bit<32>)(bit<1>)(QOS_PORT_QUEUED != 0);
            qos_backlog.write(meta.qos_base, QOS_PORT_QUEUED);
            qos_flow_backlog.read(QOS_QUEUED, QOS_FLOW);
            QOS_QUEUED = QOS_QUEUED - (bit<16>)(bit<1>)(QOS_QUEUED != 0);
            qos_flow_backlog.write(QOS_FLOW, QOS_QUEUED);
            qos_host_backlog.read(QOS_QUEUED, QOS_HOST);
            QOS_QUEUED = QOS_QUEUED - (bit<16>)(bit<1>)(QOS_QUEUED != 0);
            qos_host_backlog.write(QOS_HOST, QOS_QUEUED);
            qos_sojourn_us.read(QOS_SUM, meta.qos_base);
            QOS_SUM = QOS_SUM + (bit<64>)std_meta.deq_timedelta;
            qos_sojourn_us.write(meta.qos_base, QOS_SUM);
            qos_dequeued.read(QOS_SUM, meta.qos_base);
            QOS_SUM = QOS_SUM + 1;
            qos_dequeued.write(meta.qos_base, QOS_SUM);

            if (qos_egress_table.apply().hit) {
                // CoDel (RFC 8289) at dequeue, at most one drop per packet (P4-CoDel).
                CODEL_INDEX = meta.qos_base;
                if (meta.qos_flags & QOS_PER_FLOW != 0) {
                    CODEL_INDEX = QOS_FLOW;
                }
                codel_times.read(CODEL_TIMES, CODEL_INDEX);
                codel_state.read(CODEL_STATE, CODEL_INDEX);
                CODEL_VERDICT = 0;
                if (std_meta.deq_timedelta < meta.qos_limit) {
                    CODEL_TIMES[63:32] = 0;
                } else if (CODEL_TIMES[63:32] == 0) {
                    CODEL_TIMES[63:32] = std_meta.egress_global_timestamp[31:0] + meta.qos_shares;
                } else if (std_meta.egress_global_timestamp[31:0] - CODEL_TIMES[63:32]
                           < 0x80000000) {
                    CODEL_VERDICT = 1;  // above target for an interval (wrap-safe now >= t)
                }
                if (CODEL_STATE[0:0] == 1) {
                    if (CODEL_VERDICT == 0) {
                        CODEL_STATE[0:0] = 0;
                    } else if (std_meta.egress_global_timestamp[31:0] - CODEL_TIMES[31:0]
                               < 0x80000000) {
                        CODEL_STATE[31:16] = CODEL_STATE[31:16] + 1;
                        CODEL_VERDICT = 3;
                    }
                } else if (CODEL_VERDICT == 1) {
                    // Back in the dropping state soon after leaving it: resume near the
                    // drop rate it had (RFC 8289's count - 2).
                    if (CODEL_STATE[31:16] > 2 && std_meta.egress_global_timestamp[31:0]
                            - CODEL_TIMES[31:0] < meta.qos_shares << 4) {
                        CODEL_STATE[31:16] = CODEL_STATE[31:16] - 2;
                    } else {
                        CODEL_STATE[31:16] = 1;
                    }
                    CODEL_STATE[0:0] = 1;
                    CODEL_TIMES[31:0] = std_meta.egress_global_timestamp[31:0];
                    CODEL_VERDICT = 3;
                }
                if (CODEL_VERDICT == 3) {
                    meta.index = (bit<32>)CODEL_STATE[31:16];
                    codel_law.apply();
                    CODEL_TIMES[31:0] = CODEL_TIMES[31:0] + meta.index;
                }
                codel_times.write(CODEL_INDEX, CODEL_TIMES);
                codel_state.write(CODEL_INDEX, CODEL_STATE);
                if (CODEL_VERDICT == 3) {
                    meta.drop_reason = DropReason.QOS_AQM;
                    COUNT_DROP();
                    exit;  // nothing more for a dropped packet (the NAT, connection events)
                }
            }
        }
    }
}

#endif
