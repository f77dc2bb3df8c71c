/* VIP lookup, which sends a VIP's packet on to its connection's backend and the rest to
 * the reverse NAT and the routes; and the addresses the switch answers for (ARP). */
#ifndef P4LB_VIP_P4
#define P4LB_VIP_P4

control VipLookup(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    FromBackend() from_backend;
    Routing() routing;

    // The per-VIP "flip" entry: which service, algorithm and version of the pool and
    // slot tables is live. Changing a pool means writing the other version's entries and
    // then modifying this one entry, so a change is never seen half-applied. The action
    // also looks up the packet's connection state and, for a known connection, updates
    // its slot and sends the packet to the slot's port: for a known flow that is the
    // whole ingress (in BMv2 every table and condition costs far more than its work).
    // One action is cheap only because the build turns off p4c's local copy
    // propagation (Makefile), which would substitute each field's defining expression
    // into all its later uses within the action.
    // shared: the VIP's connections are shared by a tier of balancers (a client's FIN or
    // RST is reported to its controller: affinity.p4's CONN_REFRESH).
    @name(".set_vip")
    action set_vip(service_id_t service_id, Algorithm algorithm, version_t version,
                   bit<16> pool_size, bit<16> slot_count, bit<1> shared) {
        meta.service_id = service_id;
        meta.algorithm = algorithm;
        CONN_LOOKUP(hdr.ipv4.src_addr, hdr.l4.src_port, service_id);
        CONN_REFRESH(shared, CONN_EVENT(conn_closed_t, CONN_CLOSED))
        // What choosing a backend needs: a known connection does without (in BMv2 every
        // field written costs far more than a branch). The size is what the VIP's
        // algorithm picks from: its pool (IPHASH) or its slot table.
        if (meta.flow_status == FLOW_UNKNOWN) {
            meta.version = version;
            if (algorithm == Algorithm.IPHASH) {
                meta.size = (bit<32>)pool_size;
            } else {
                meta.size = (bit<32>)slot_count;
            }
        }
    }

    // Matches (VIP address, protocol, port). Hit: the packet is load-balanced.
    // Miss: routed (a VIP's address on an unknown port has a route that refuses it).
    // The controller writes one entry per VIP and modifies it to flip versions.
    @name(".vip_table")
    table vip_table {
        key = {
            hdr.ipv4.dst_addr:  exact @name("addr");
            hdr.ipv4.protocol:  exact @name("protocol");
            hdr.l4.dst_port:    exact @name("port");
        }
        actions = { set_vip; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_SERVICES;
    }

    // Which branch a packet takes is the action the table ran: BMv2 goes straight to the
    // branch, where a condition after the table costs an evaluation. A VIP's packet is
    // done here: a known connection has its backend and port, an unknown flow gets them
    // from the ingress's ConnectionState, which both families' lookups share.
    apply {
        switch (vip_table.apply().action_run) {
            set_vip: {}
            default: {
                // A backend's reply becomes the VIP's; then everything is routed.
                from_backend.apply(hdr, meta, std_meta);
                routing.apply(hdr, meta, std_meta);
            }
        }
    }
}

// ARP for VIP addresses: the switch answers; other ARP is flooded.
control VipAddresses(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t std_meta) {
    // Answer an ARP request for a VIP: it goes back out of its port as a reply.
    // The asker's address is swapped through tha (a local would be one more PHV field,
    // reset for every packet).
    @name(".vip_address")
    action vip_address(mac_addr_t vip_mac) {
        hdr.arp.tha = (mac_addr_t)hdr.arp.spa;
        hdr.arp.spa = hdr.arp.tpa;
        hdr.arp.tpa = (ipv4_addr_t)hdr.arp.tha;
        hdr.arp.tha = hdr.arp.sha;
        hdr.ethernet.dst_addr = hdr.arp.sha;
        hdr.ethernet.src_addr = vip_mac;
        hdr.arp.oper = ARP_OP_REPLY;
        hdr.arp.sha = vip_mac;
        std_meta.egress_spec = std_meta.ingress_port;
    }

    // Hosts resolve each other: flood to every port but the ingress one.
    action flood() {
        std_meta.mcast_grp = FLOOD_MCAST_GROUP;
    }

    // Matches an ARP request's target address. Hit: a VIP's address, answered with
    // vip_mac. Miss: flooded. The controller writes one entry per VIP address.
    @name(".vip_address_table")
    table vip_address_table {
        key = { hdr.arp.tpa: exact @name("addr"); }
        actions = { vip_address; @defaultonly flood; }
        const default_action = flood();
        size = MAX_SERVICES;
    }

    apply {
        if (hdr.arp.oper == ARP_OP_REQUEST) {
            vip_address_table.apply();
        } else {
            flood();
        }
    }
}

#endif
