"""The command line: `p4lb`'s command table, its handlers, their output, and `p4lb shell`."""
