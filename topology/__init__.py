"""The labs p4lb runs in: the single-switch Mininet lab and the tier, with their switches."""
