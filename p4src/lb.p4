/* p4lb: a Layer-4 load balancer for BMv2 (v1model).
 * This file only includes the stages and instantiates the pipeline.
 *
 * The code is tuned to BMv2's cost model (simple_switch as built by p4c's BMv2 back end),
 * where the work a packet costs is not where the P4 puts it:
 *   - BMv2 resets every metadata field of every packet, and p4c's back end gives a field
 *     of its own to each hash input, digest member, register index or value, conditional
 *     expression and bool that is not already one: so fields are few and shared (no
 *     locals), hashes take one concatenation, indexes go through meta.index;
 *   - a table, or a condition between tables, costs far more than an `if` inside an
 *     action: so a known connection's whole ingress is one action (vip.p4's set_vip),
 *     stages are macros inside actions (affinity.p4, nat.p4) rather than actions,
 *     controls or functions of their own, and drops are counted where they happen;
 *   - a parser transition's keyset is matched on the header's bytes, far cheaper than an
 *     expression or a verify (checks.p4);
 *   - the ingress runs in one thread, the egress in threads of their own: what need not
 *     decide a packet's port (the NAT toward the backend, connection counters) is egress
 *     work (egress.p4);
 *   - p4c's local copy propagation would evaluate a field's defining expression again at
 *     each use within an action: the Makefile turns it off (P4C_FLAGS).
 * The comments at each place say which of these it follows. `make bench-cost` measures
 * what each path and BMv2 phase costs (callgrind). */
#include <core.p4>
#include <v1model.p4>

#include "include/size.p4"
#include "include/defines.p4"
#include "include/headers.p4"
#include "include/metadata.p4"
#include "include/checks.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/drops.p4"
#include "include/load.p4"
#include "include/selection.p4"
#include "include/affinity.p4"
#include "include/nat.p4"
#include "include/l3.p4"
#include "include/ipv6.p4"
#include "include/vip.p4"
#include "include/qos.p4"
#include "include/ingress.p4"
#include "include/egress.p4"

V1Switch(LbParser(),
         LbVerifyChecksum(),
         LbIngress(),
         LbEgress(),
         LbComputeChecksum(),
         LbDeparser()) main;
