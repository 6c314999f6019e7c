"""What compaction does with transactions (Kafka's cleaner rules), as a pure state
walked over the batches in offset order.

- A data batch of an aborted transaction (known from the aborted-transaction index)
  is removed whole and never enters the key map.
- A marker stays while data of its transaction is still in the log: the pass that
  reads such data keeps the marker. A marker whose transaction left no data in the
  pass may go: the first such pass stamps it with a delete horizon (now +
  delete.retention.ms, as for tombstones) and a pass at or after the horizon removes
  it, so a reader that saw the data has that long to see the marker too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from slipstream.log.api import AbortedTxn
from slipstream.protocol.record_batch import BatchHeader


class TxnCleaningState:
    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # Aborted transactions not yet reached, by first offset.
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        # Producer id -> whether data of its aborted transaction was read in this pass.
        self._aborted_ongoing: dict[int, bool] = {}
        self._committed_ongoing: set[int] = set()

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            self._aborted_ongoing[pending.popleft().producer_id] = False

    def on_data(self, header: BatchHeader) -> bool:
        """Read a data batch; True when it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        pid = header.producer_id
        if pid in self._aborted_ongoing:
            self._aborted_ongoing[pid] = True
            return True
        if header.record_count:  # a producer's last batch kept empty holds nothing to commit
            self._committed_ongoing.add(pid)
        return False

    def on_marker(self, header: BatchHeader, *, abort: bool) -> bool:
        """Read a marker; True when its transaction left no data in this pass (the
        marker may be removed once its delete horizon has passed)."""
        self._reach(header.last_offset)
        pid = header.producer_id
        if abort:
            return not self._aborted_ongoing.pop(pid, False)
        if pid in self._committed_ongoing:
            self._committed_ongoing.discard(pid)
            return False
        return True
