"""The disk log: a partition as segment files in one directory (``disk_log.DiskLog``)."""
