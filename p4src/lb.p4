/* p4lb: a Layer-4 load balancer for BMv2 (v1model).
 * This file only includes the stages and instantiates the pipeline. */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/drops.p4"
#include "include/load.p4"
#include "include/selection.p4"
#include "include/affinity.p4"
#include "include/nat.p4"
#include "include/l3.p4"
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
