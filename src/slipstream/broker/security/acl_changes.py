"""Make a change to the ACL set durable, or take it back: the ACL handlers' one write path."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ..state import BrokerState
from .acl import AclBinding, AclFilter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedChange:
    failure: str | None = None  # why the change could not be saved (it was undone)
    # Every ACL the change deleted: those ``removed`` from this broker's set and those the
    # ``removed_by`` filters took out of the stored set (held here or not).
    deleted: frozenset[AclBinding] = frozenset()


def save_or_undo(
    state: BrokerState,
    *,
    added: Sequence[AclBinding] = (),
    removed: Sequence[AclBinding] = (),
    removed_by: Sequence[AclFilter] = (),
) -> SavedChange:
    """Apply ``added``/``removed`` (already applied to the authorizer) and the ``removed_by``
    filters to the stored ACL set as it is now, then hold that set (which keeps changes made
    through other brokers of a cluster); if the write fails, undo them (so memory never
    holds what a restart would lose) and say why."""
    authorizer = state.authorizer
    if authorizer is None or (not added and not removed and not removed_by):
        return SavedChange(deleted=frozenset(removed))
    try:
        stored = state.acl_store.apply(added, removed, removed_by)
    except Exception as exc:
        log.exception("could not save the ACLs")
        for binding in added:
            authorizer.remove(binding)
        for binding in removed:
            authorizer.add(binding)
        return SavedChange(failure=f"the ACLs could not be saved: {exc}")
    if stored is None:  # no store: this broker's set is the only one
        return SavedChange(deleted=frozenset(removed))
    authorizer.hold_exactly(stored.bindings)
    return SavedChange(deleted=stored.deleted | frozenset(removed))
