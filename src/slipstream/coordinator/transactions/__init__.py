"""The transaction coordinator as a pure state machine (see ``coordinator.py`` and ``result.py``)."""

from .config import TxnConfig
from .coordinator import COORDINATOR_EPOCH, TRANSACTION_STATE_TOPIC, TransactionCoordinator
from .metadata import TransactionMetadata, TxnTransit
from .result import MarkerJob, TxnResult
from .state import VALID_PREVIOUS_STATES, IllegalTxnTransition, TxnState

__all__ = [
    "COORDINATOR_EPOCH",
    "TRANSACTION_STATE_TOPIC",
    "VALID_PREVIOUS_STATES",
    "IllegalTxnTransition",
    "MarkerJob",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnConfig",
    "TxnResult",
    "TxnState",
    "TxnTransit",
]
