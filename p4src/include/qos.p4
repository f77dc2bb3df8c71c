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

// Ports that can carry a discipline at once: each takes a slot of the state below.
const bit<32> QOS_SLOTS = 8;
// Flow (and host) buckets per slot: 64 hash buckets, the queue's fairness granularity
// (Linux sfq hashes into 1024; a 1,000 pps bottleneck rarely sees more than a few dozen
// flows, and every bucket costs registers on all slots).
const bit<32> QOS_BUCKETS = 64;
const bit<32> QOS_STATE_SIZE = 512;   // QOS_SLOTS * QOS_BUCKETS
const bit<16> QOS_HASH_SALT = 0x5a17; // the queue hash differs from the balancer's (crc32)
const bit<3>  QOS_BULK_QUEUE = 0;     // BMv2 priority 0: the shaped port queue
const bit<3>  QOS_SPARSE_QUEUE = 1;   // BMv2 priority 1: flows with nothing queued
// meta.qos_flags
const bit<4>  QOS_BY_DST = 1;         // host = destination address (else source)
const bit<4>  QOS_POLICED = 2;        // ingress: the per-class meter applies
const bit<4>  QOS_SPARSE = 4;         // ingress: flows with nothing queued go first
const bit<4>  QOS_ADMITTED = 8;       // ingress -> egress: the packet holds a place
const bit<4>  QOS_PER_FLOW = 4;       // egress: CoDel state per flow bucket (else per port)

// Packets admitted toward a slot's port and not yet dequeued: all, per flow bucket and
// per host bucket. +1 at ingress, -1 at egress (the data plane's own state).
register<bit<32>>(QOS_SLOTS) qos_backlog;
register<bit<16>>(QOS_STATE_SIZE) qos_flow_backlog;
register<bit<16>>(QOS_STATE_SIZE) qos_host_backlog;
// PCQ's per-class rate, per (slot, host bucket); the controller sets every index's rate.
@name(".qos_class_rate")
meter(QOS_STATE_SIZE, MeterType.packets) qos_class_rate;
// CoDel state per (slot, bucket) (bucket 0 for a per-port CoDel): the time the sojourn
// first stayed above target plus an interval (0: below target), the next drop's time,
// the drop count of the current dropping state, and whether it is dropping.
register<bit<32>>(QOS_STATE_SIZE) codel_first_above;
register<bit<32>>(QOS_STATE_SIZE) codel_drop_next;
register<bit<16>>(QOS_STATE_SIZE) codel_count;
register<bit<1>>(QOS_STATE_SIZE) codel_dropping;
// Per slot, for measurement (read over Thrift by bench/qos.py): the sum of deq_timedelta
// (µs each packet spent queued, rate limiter included) and the packets it sums.
register<bit<64>>(QOS_SLOTS) qos_sojourn_us;
register<bit<64>>(QOS_SLOTS) qos_dequeued;

// The flow bucket and host bucket, the same at ingress and egress (QoS runs before the
// egress NAT).
#define QOS_FLOW_HASH(out) \
    hash(out, HashAlgorithm.crc16, (bit<32>)0, { QOS_HASH_SALT, hdr.ipv4.src_addr, \
         hdr.ipv4.dst_addr, hdr.ipv4.protocol, meta.l4_src_port, meta.l4_dst_port }, \
         QOS_BUCKETS)
#define QOS_HOST_HASH(out) \
    if (meta.qos_flags & QOS_BY_DST != 0) { \
        hash(out, HashAlgorithm.crc16, (bit<32>)0, { QOS_HASH_SALT, hdr.ipv4.dst_addr }, \
             QOS_BUCKETS); \
    } else { \
        hash(out, HashAlgorithm.crc16, (bit<32>)0, { QOS_HASH_SALT, hdr.ipv4.src_addr }, \
             QOS_BUCKETS); \
    }

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
            bit<32> b;
            bit<32> flow;
            bit<32> host;
            bit<32> backlog;
            bit<16> flow_backlog;
            bit<16> host_backlog;
            bit<2> color = V1MODEL_METER_COLOR_GREEN;
            QOS_FLOW_HASH(b);
            flow = meta.qos_base + b;
            QOS_HOST_HASH(b);
            host = meta.qos_base + b;
            qos_backlog.read(backlog, meta.qos_base / QOS_BUCKETS);
            qos_flow_backlog.read(flow_backlog, flow);
            qos_host_backlog.read(host_backlog, host);
            if (meta.qos_flags & QOS_POLICED != 0) {
                qos_class_rate.execute_meter(host, color);
            }
            if (color == V1MODEL_METER_COLOR_RED) {
                meta.drop_reason = DropReason.QOS_METER;
                COUNT_DROP();
            } else if (backlog >= meta.qos_limit || flow_backlog >= meta.qos_shares[31:16]
                       || host_backlog >= meta.qos_shares[15:0]) {
                meta.drop_reason = DropReason.QOS_TAIL;
                COUNT_DROP();
            } else {
                qos_backlog.write(meta.qos_base / QOS_BUCKETS, backlog + 1);
                qos_flow_backlog.write(flow, flow_backlog + 1);
                qos_host_backlog.write(host, host_backlog + 1);
                meta.qos_flags = meta.qos_flags | QOS_ADMITTED;
                if (meta.qos_flags & QOS_SPARSE != 0 && flow_backlog == 0) {
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
            bit<32> b;
            bit<32> flow;
            bit<32> backlog;
            bit<16> count;
            bit<64> total;
            // Release the packet's place: port, flow and host counts, never below zero (a
            // slot's counts are reset when a port gets a discipline).
            QOS_FLOW_HASH(b);
            flow = meta.qos_base + b;
            qos_backlog.read(backlog, meta.qos_base / QOS_BUCKETS);
            if (backlog != 0) {
                qos_backlog.write(meta.qos_base / QOS_BUCKETS, backlog - 1);
            }
            qos_flow_backlog.read(count, flow);
            if (count != 0) {
                qos_flow_backlog.write(flow, count - 1);
            }
            QOS_HOST_HASH(b);
            qos_host_backlog.read(count, meta.qos_base + b);
            if (count != 0) {
                qos_host_backlog.write(meta.qos_base + b, count - 1);
            }
            qos_sojourn_us.read(total, meta.qos_base / QOS_BUCKETS);
            qos_sojourn_us.write(meta.qos_base / QOS_BUCKETS,
                                 total + (bit<64>)std_meta.deq_timedelta);
            qos_dequeued.read(total, meta.qos_base / QOS_BUCKETS);
            qos_dequeued.write(meta.qos_base / QOS_BUCKETS, total + 1);

            if (qos_egress_table.apply().hit) {
                // CoDel (RFC 8289) at dequeue, at most one drop per packet (P4-CoDel).
                bit<32> state = meta.qos_base;
                if (meta.qos_flags & QOS_PER_FLOW != 0) {
                    state = flow;
                }
                bit<32> now = std_meta.egress_global_timestamp[31:0];
                bit<32> first_above;
                bit<32> drop_next;
                bit<1> dropping;
                bit<1> ok_to_drop = 0;
                codel_first_above.read(first_above, state);
                codel_drop_next.read(drop_next, state);
                codel_count.read(count, state);
                codel_dropping.read(dropping, state);
                if (std_meta.deq_timedelta < meta.qos_limit) {
                    first_above = 0;
                } else if (first_above == 0) {
                    first_above = now + meta.qos_shares;
                } else if ((int<32>)(now - first_above) >= 0) {
                    ok_to_drop = 1;
                }
                bit<1> drop = 0;
                if (dropping == 1) {
                    if (ok_to_drop == 0) {
                        dropping = 0;
                    } else if ((int<32>)(now - drop_next) >= 0) {
                        count = count + 1;
                        drop = 1;
                    }
                } else if (ok_to_drop == 1) {
                    // Back in the dropping state soon after leaving it: resume near the
                    // drop rate it had (RFC 8289's count - 2).
                    if (count > 2
                            && (int<32>)(now - drop_next) < (int<32>)(meta.qos_shares << 4)) {
                        count = count - 2;
                    } else {
                        count = 1;
                    }
                    dropping = 1;
                    drop_next = now;
                    drop = 1;
                }
                if (drop == 1) {
                    meta.index = (bit<32>)count;
                    codel_law.apply();
                    drop_next = drop_next + meta.index;
                }
                codel_first_above.write(state, first_above);
                codel_drop_next.write(state, drop_next);
                codel_count.write(state, count);
                codel_dropping.write(state, dropping);
                if (drop == 1) {
                    meta.drop_reason = DropReason.QOS_AQM;
                    COUNT_DROP();
                    exit;  // nothing more for a dropped packet (the NAT, connection events)
                }
            }
        }
    }
}

#endif
