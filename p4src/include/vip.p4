/* VIP lookup and ARP for VIP addresses. */
#ifndef P4LB_VIP_P4
#define P4LB_VIP_P4

control VipLookup(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    @name(".vip_address")
    action vip_address(mac_addr_t vip_mac) {
        meta.is_vip_addr = 1;
        meta.vip_mac = vip_mac;
    }

    // Matches an IPv4 address (an ARP target or a packet's destination).
    // Hit: the address belongs to at least one VIP; ARP requests for it are answered
    // with vip_mac. The controller writes one entry per VIP address.
    @name(".vip_address_table")
    table vip_address_table {
        key = { meta.lookup_addr: exact @name("addr"); }
        actions = { vip_address; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_SERVICES;
    }

    // The per-VIP "flip" entry: which service, algorithm and version of the pool and
    // slot tables is live. Changing a pool means writing the other version's entries and
    // then modifying this one entry, so a change is never seen half-applied.
    @name(".set_vip")
    action set_vip(service_id_t service_id, algorithm_t algorithm, version_t version,
                   bit<16> pool_size, bit<16> slot_count) {
        meta.service_id = service_id;
        meta.algorithm = algorithm;
        meta.version = version;
        meta.pool_size = pool_size;
        meta.slot_count = slot_count;
    }

    // Matches (VIP address, protocol, port). Hit: the packet is load-balanced.
    // Miss on a VIP address: dropped and counted as an unknown VIP port.
    // The controller writes one entry per VIP and modifies it to flip versions.
    @name(".vip_table")
    table vip_table {
        key = {
            hdr.ipv4.dst_addr:  exact @name("addr");
            hdr.ipv4.protocol:  exact @name("protocol");
            meta.l4_dst_port:   exact @name("port");
        }
        actions = { set_vip; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_SERVICES;
    }

    apply {
        if (hdr.arp.isValid()) {
            meta.lookup_addr = hdr.arp.tpa;
        } else {
            meta.lookup_addr = hdr.ipv4.dst_addr;
        }
        vip_address_table.apply();

        if (hdr.arp.isValid()) {
            if (hdr.arp.oper == ARP_OP_REQUEST && meta.is_vip_addr == 1) {
                // Answer for the VIP: the request goes back out of its port as a reply.
                ipv4_addr_t asker = hdr.arp.spa;
                hdr.ethernet.dst_addr = hdr.arp.sha;
                hdr.ethernet.src_addr = meta.vip_mac;
                hdr.arp.oper = ARP_OP_REPLY;
                hdr.arp.tha = hdr.arp.sha;
                hdr.arp.sha = meta.vip_mac;
                hdr.arp.spa = hdr.arp.tpa;
                hdr.arp.tpa = asker;
                std_meta.egress_spec = std_meta.ingress_port;
            } else {
                // Hosts resolve each other: flood to every port but the ingress one.
                std_meta.mcast_grp = FLOOD_MCAST_GROUP;
                meta.is_flood = 1;
            }
        } else if (meta.is_vip_addr == 1) {
            meta.vip_addr = hdr.ipv4.dst_addr;
            if (hdr.ipv4.frag_offset != 0 || (hdr.ipv4.flags & 3w1) != 0) {
                meta.drop_reason = DROP_FRAGMENT;
            } else if (!hdr.tcp.isValid() && !hdr.udp.isValid()) {
                meta.drop_reason = DROP_VIP_PORT_UNKNOWN;
            } else if (!vip_table.apply().hit) {
                meta.drop_reason = DROP_VIP_PORT_UNKNOWN;
            }
        }
    }
}

#endif
