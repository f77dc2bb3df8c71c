/* Per-backend load: what the LEAST* algorithms compare when they choose a backend, kept
 * up to date by the connection state (affinity.p4) on both directions of a connection. */
#ifndef P4LB_LOAD_P4
#define P4LB_LOAD_P4

// Per backend id (index 0: a junk bin for packets that change nothing), what the LEAST*
// algorithms compare. Active connections: +1 when the client's first ACK establishes one,
// -1 exactly once when it ends: the client's FIN or RST, the backend's FIN or RST (the
// reply path), or its slot reclaimed after it aged out without either (a lost FIN leaks
// only until its slot is reused). Half-open connections never count: a SYN flood does not
// inflate them.
register<bit<32>>(MAX_BACKENDS) active_conns;
register<bit<32>>(MAX_BACKENDS) response_time;   // RT_SCALE x ticks, moving average
register<bit<64>>(MAX_BACKENDS) packet_window;   // window 16 | previous 24 | current 24
// A packet_window entry's fields: the window it was last counted in (16 bits of its id),
// the count of the window before that one, and its own count.
#define WINDOW_OF(w)       (w)[63:48]
#define PREVIOUS_COUNT(w)  (w)[47:24]
#define CURRENT_COUNT(w)   (w)[23:0]
// The current packet window (16 bits of it).
#define WINDOW_ID ((bit<16>)(NOW >> PKT_WINDOW_BITS))
// Whether entry `w` was last counted in the current window, or in the one before it.
#define COUNTED_NOW(w)    (bit<1>)(WINDOW_OF(w) == WINDOW_ID)
#define COUNTED_BEFORE(w) (bit<1>)(WINDOW_OF(w) + 1 == WINDOW_ID)

// Active connections of backend `index` up by `up` (0 or 1) and down by
// `down` (0 or 1; never below zero). `index` is a field: p4c gives each index or value
// expression of a register access a PHV field of its own, which BMv2 resets per packet.
#define ADD_ACTIVE(index, up, down) \
    active_conns.read(meta.load, (index)); \
    meta.load = meta.load + (bit<32>)(up) - (bit<32>)(bit<1>)((down) == 1 && meta.load != 0); \
    active_conns.write((index), meta.load)

#endif
