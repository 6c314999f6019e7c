"""A classic consumer group's in-memory state: members, generation, protocol, leader.

This is the bookkeeping of Kafka's ``ClassicGroup``; the rebalance protocol
that drives it lives in ``group_manager``. Members are kept in join order
(a dict), so "the first member" and protocol-vote ties are deterministic.
"""

from __future__ import annotations

import logging
from collections import Counter

from ..protocol import consumer_protocol
from .member import Member, Protocols
from .state import GroupState, can_rebalance, check_transition

log = logging.getLogger("slipstream.coordinator")


class ClassicGroup:
    def __init__(
        self,
        group_id: str,
        now_ms: int,
        state: GroupState = GroupState.EMPTY,
        *,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp_ms: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.current_state_timestamp_ms: int | None = (
            now_ms if current_state_timestamp_ms is None else current_state_timestamp_ms
        )
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_join_members: set[str] = set()  # KIP-394: issued an id, not yet joined
        self.pending_sync_members: set[str] = set()
        # protocol name -> how many members list it (an entry listed twice counts twice, as in Kafka).
        self.supported_protocols: Counter[str] = Counter()
        self.subscribed_topics: set[str] | None = None
        # An initial rebalance's delay is extended while new members keep arriving.
        self.new_member_added = False
        # For the rebalance history (history.py): when the current rebalance and generation
        # began, and who owned which partition after the last assignment ("topic-N" -> member).
        self.rebalance_started_ms: int | None = None
        self.generation_started_ms: int | None = None
        self.partition_owners: dict[str, str] | None = None
        self.generation_leader: str | None = None

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
            f"protocol={self.protocol_name!r}, leader={self.leader_id!r}, members={list(self.members)})"
        )

    # ---------------------------------------------------------------- state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    @property
    def in_initial_delay(self) -> bool:
        """Preparing its first rebalance since it was Empty (group.initial.rebalance.delay.ms runs)."""
        return self.state is GroupState.PREPARING_REBALANCE and self.previous_state is GroupState.EMPTY

    # ---------------------------------------------------------------- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    @property
    def num_members(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: Member) -> None:
        """Add ``member`` (its join_pending, if set, counts as awaiting join)."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(
                    f"static member {member.group_instance_id!r} is already in group {self.group_id!r}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError("the group's and the member's protocol types differ")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise RuntimeError("none of the member's protocols is supported by the group")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self, member: Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> tuple[Member, Member]:
        """Give a static member a new member id, keeping its place; returns (old, new)."""
        old = self.members.pop(old_member_id)
        new = Member(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=list(old.protocols),
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return old, new

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise RuntimeError(f"pending member {member_id} is already a member")
        self.pending_join_members.add(member_id)

    # ---------------------------------------------------------------- join phase

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join_members and all(m.is_awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                log.info(
                    "group %s: leader %s did not rejoin in time; %s is the new leader",
                    self.group_id, self.leader_id, member.member_id,
                )
                self.leader_id = member.member_id
                return True
        return False

    # ---------------------------------------------------------------- protocols

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n and n > 0}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Kafka's supportsProtocols: would a joiner with these protocols fit the group?"""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name in protocols
        )

    def protocol_votes(self) -> dict[str, int]:
        """Each member's vote (its first preferred candidate), counted per protocol in vote order."""
        candidates = self.candidate_protocols()
        return dict(Counter(m.vote(candidates) for m in self.members.values()))

    def select_protocol(self) -> str:
        """Every member votes for its first preferred candidate; most votes wins.

        Candidates are the protocols all members support. Ties go to the
        protocol that received a vote first (members in join order).
        """
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id!r}")
        votes = self.protocol_votes()
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    # ---------------------------------------------------------------- generations

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == consumer_protocol.PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None when unknown (not the consumer protocol)."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(consumer_protocol.subscribed_topics(member.metadata(self.protocol_name)))
        except (ValueError, KeyError) as exc:
            log.warning(
                "group %s: cannot parse consumer protocol %s subscriptions (%s); "
                "subscribed topics unknown", self.group_id, self.protocol_name, exc,
            )
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def assignment_map(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}
