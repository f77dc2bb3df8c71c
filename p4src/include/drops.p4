/* Drops, counted by reason and VIP wherever they happen: the ingress, and the egress's
 * NAT (a backend removed under open connections). */
#ifndef P4LB_DROPS_P4
#define P4LB_DROPS_P4

// Indexed by service id * NUM_DROP_REASONS + reason; service 0 = not tied to a VIP.
// Global: the egress counts its own drops (a backend removed under open connections).
@name(".drops")
counter(DROP_COUNTER_SIZE, CounterType.packets) drops;

#define COUNT_DROP() \
    meta.index = meta.service_id * NUM_DROP_REASONS + (bit<32>)(bit<8>)meta.drop_reason; \
    drops.count(meta.index); \
    mark_to_drop(std_meta)

#endif
