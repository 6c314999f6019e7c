"""DescribeLogDirs (key 35). Served v1-5 (Kafka 4 dropped v0).

One log directory (``<data_dir>/logs``; storage "memory" or "postgres" reports its name) with
each partition's size in bytes. A null ``topics`` describes every partition;
topics and partitions that do not exist are left out, as Kafka does. v4 adds
the volume's total and usable bytes (-1 for memory storage).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ...protocol.apis.describe_log_dirs import (
    SPEC,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResponsePartition,
    DescribeLogDirsResponseResult,
    DescribeLogDirsResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 1
MAX_VERSION = 5


CLUSTER_AUTHORIZATION_FAILED = 31


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    state = ctx.state
    topics = state.topics
    if not ctx.authorized_cluster(Operation.DESCRIBE):
        # Kafka: Describe on the cluster, else no log dir at all (v3+ also says why).
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results=[])
    if request.topics is None:
        wanted = {name: list(range(len(topic.partitions))) for name, topic in sorted(topics.topics.items())}
    else:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(t.topic, []).extend(t.partitions)
    described = []
    for name, indexes in wanted.items():
        partitions = []
        for index in sorted(set(indexes)):
            plog = topics.partition(name, index)
            if plog is not None:
                partitions.append(
                    DescribeLogDirsResponsePartition(partition_index=index, partition_size=plog.size_bytes)
                )
        if partitions:
            described.append(DescribeLogDirsResponseTopic(name=name, partitions=partitions))
    # memory, or postgres (no local directory: the logs live in the database)
    result = DescribeLogDirsResponseResult(error_code=ErrorCode.NONE, log_dir=state.config.storage, topics=described)
    if state.config.storage == "disk":
        log_dir = Path(state.config.data_dir).resolve() / "logs"
        result.log_dir = str(log_dir)
        try:
            usage = shutil.disk_usage(log_dir)
        except OSError:
            pass  # the volume's figures are optional (-1)
        else:
            result.total_bytes, result.usable_bytes = usage.total, usage.free
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
