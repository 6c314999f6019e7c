"""Make a change to the ACL set durable, or take it back: the ACL handlers' one write path."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..state import BrokerState
from .acl import AclBinding

log = logging.getLogger(__name__)


def save_or_undo(
    state: BrokerState, *, added: Sequence[AclBinding] = (), removed: Sequence[AclBinding] = ()
) -> str | None:
    """Write the ACL set after ``added``/``removed`` were applied to the authorizer; if the
    write fails, undo them (so memory never holds what a restart would lose) and return
    the reason."""
    authorizer = state.authorizer
    if authorizer is None or (not added and not removed):
        return None
    try:
        state.acl_store.save(authorizer.bindings())
    except Exception as exc:
        log.exception("could not save the ACLs")
        for binding in added:
            authorizer.remove(binding)
        for binding in removed:
            authorizer.add(binding)
        return f"the ACLs could not be saved: {exc}"
    return None
