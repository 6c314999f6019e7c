"""The broker's HTTP admin listener (off by default; ``--admin-port``).

``http_server`` is a tiny HTTP/1.1 server on the broker's own event loop (GET only,
keep-alive); ``routes`` maps paths to answers; ``prometheus`` is the scrape-time
collector over the broker's plain counters (broker/metrics.py); ``views`` builds the
JSON API's documents from the broker's state.
"""
