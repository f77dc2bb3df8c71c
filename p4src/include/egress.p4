/* Egress: the NAT toward the backends and the connection counting; neither decides where
 * a packet goes. BMv2 runs the egress in threads of its own beside its one ingress thread,
 * so work done here does not hold up the next packet's ingress. A flooded copy (its
 * mcast_grp is still the flood group) never goes back out of the port it came in on. */
#ifndef P4LB_EGRESS_P4
#define P4LB_EGRESS_P4

control LbEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t std_meta) {
    ToBackend() to_backend;
    ConnectionEvents() connection_events;
    QosDequeue() qos_dequeue;

    apply {
        qos_dequeue.apply(hdr, meta, std_meta);  // first: before the NAT changes the flow
        if (meta.service_id != 0) {  // to a VIP (the NAT counts its own drop)
            to_backend.apply(hdr, meta, std_meta);
            connection_events.apply(hdr, meta, std_meta);
        } else if (std_meta.mcast_grp == FLOOD_MCAST_GROUP
                   && std_meta.egress_port == std_meta.ingress_port) {
            mark_to_drop(std_meta);
        }
    }
}

#endif
