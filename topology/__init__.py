"""Mininet topology for p4lb: one BMv2 switch, clients, HTTP servers, a VIP."""
