"""The disk log: a partition as segment files in one directory.

``disk_log.DiskLog`` and ``store.DiskLogStore`` are what the broker opens; a segment is
``segment.py`` with its sparse indexes (``index.py``) and aborted-transaction index
(``txn_index.py``); ``recovery.py`` reopens a directory after a restart or crash,
finishing an interrupted compaction swap first (``swap.py``); ``compaction_space.py``
is this log's side of a compaction pass.
"""
