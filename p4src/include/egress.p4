/* Egress: the NAT toward the backends, which also counts the connections and keeps a
 * flooded copy from going back out of the port it came in on; none of it decides where a
 * packet goes. BMv2 runs the egress in threads of its own beside its one ingress thread,
 * so work done here does not hold up the next packet's ingress. */
#ifndef P4LB_EGRESS_P4
#define P4LB_EGRESS_P4

control LbEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t std_meta) {
    ToBackend() to_backend;
    QosDequeue() qos_dequeue;

    apply {
        qos_dequeue.apply(hdr, meta, std_meta);  // first: before the NAT changes the flow
        to_backend.apply(hdr, meta, std_meta);
    }
}

#endif
