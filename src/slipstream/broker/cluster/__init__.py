"""A cluster of stateless brokers over one PostgreSQL database (issue 16).

``assignment``: the pure decisions (who is live, who should lead what, which leases to
claim, renew or hand over), fed the database clock. ``database``: the SQL of the
broker registry and the leases. ``view``: what this broker knows of the cluster, read
by handlers. ``member``: the asyncio loop that heartbeats, renews and moves leases,
and tells the broker when it gains or loses a partition.
"""
