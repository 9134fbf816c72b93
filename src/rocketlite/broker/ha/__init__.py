"""4.x master/slave CommitLog replication (HA): ``server.HAServer`` on a master,
``client.HAClient`` on a slave. See ``server`` for the protocol and the divergence rule."""
