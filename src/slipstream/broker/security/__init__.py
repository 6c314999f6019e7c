"""Authentication: listeners' TLS, SASL (PLAIN, SCRAM) and the SCRAM credential store.

``credentials`` keeps salted SCRAM credentials (never passwords) in the data dir;
``sasl`` holds the sans-I/O server side of each mechanism; ``tls`` builds a listener's
SSL context and the principal of a client certificate; ``session`` is one connection's
authentication state, which the dispatcher consults before serving anything.
"""
