"""Make a change to the ACL set durable, or take it back: the ACL handlers' one write path."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..state import BrokerState
from .acl import AclBinding, AclFilter

log = logging.getLogger(__name__)


def save_or_undo(
    state: BrokerState,
    *,
    added: Sequence[AclBinding] = (),
    removed: Sequence[AclBinding] = (),
    removed_by: Sequence[AclFilter] = (),
) -> str | None:
    """Apply ``added``/``removed`` (already applied to the authorizer) and the ``removed_by``
    filters to the stored ACL set as it is now, then hold that set (which keeps changes made
    through other brokers of a cluster); if the write fails, undo them (so memory never
    holds what a restart would lose) and return the reason."""
    authorizer = state.authorizer
    if authorizer is None or (not added and not removed and not removed_by):
        return None
    try:
        stored = state.acl_store.apply(added, removed, removed_by)
    except Exception as exc:
        log.exception("could not save the ACLs")
        for binding in added:
            authorizer.remove(binding)
        for binding in removed:
            authorizer.add(binding)
        return f"the ACLs could not be saved: {exc}"
    if stored is not None:
        authorizer.hold_exactly(stored)
    return None
