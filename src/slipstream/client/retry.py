"""Retry backoff shared by the client: exponential with jitter (KIP-580), and a retry loop.

``Backoff`` is pure arithmetic (the caller supplies the attempt number and, for
tests, the random source); ``retry_async`` wraps a coroutine factory with it and a
deadline measured on the running loop's clock.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..protocol.errors import KafkaError

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """``initial_ms * multiplier**attempt``, capped at ``max_ms``, then +/- ``jitter`` (a fraction).

    Attempt 0 is the first retry. Kafka's clients use 100 ms doubling up to 1 s with
    20% jitter (retry.backoff.ms / retry.backoff.max.ms).
    """

    initial_ms: float = 100.0
    max_ms: float = 1000.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rand: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial_ms < 0 or self.max_ms < 0:
            raise ValueError("backoff times must not be negative")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be a fraction in [0, 1)")

    def delay_ms(self, attempt: int) -> float:
        if self.initial_ms == 0:
            return 0.0
        cap = max(self.max_ms, self.initial_ms)
        # Bound the exponent so huge attempt counts cannot overflow a float.
        base = min(cap, self.initial_ms * self.multiplier ** min(max(attempt, 0), 64))
        if self.jitter:
            base *= (1 - self.jitter) + 2 * self.jitter * self.rand()
        return max(0.0, base)

    def delay_s(self, attempt: int) -> float:
        return self.delay_ms(attempt) / 1000.0


def default_retriable(exc: BaseException) -> bool:
    """Network failures and Kafka errors the protocol marks retriable."""
    if isinstance(exc, KafkaError):
        return exc.retriable
    return isinstance(exc, (ConnectionError, TimeoutError, OSError))


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff | None = None,
    timeout_s: float | None = None,
    retriable: Callable[[BaseException], bool] = default_retriable,
    max_attempts: int | None = None,
) -> T:
    """Call ``fn()`` until it succeeds; retry retriable failures with backoff.

    Gives up (re-raising the last error) when the error is not retriable, after
    ``max_attempts`` calls, or when the next wait would pass ``timeout_s``.
    """
    backoff = backoff or Backoff()
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            attempt += 1
            if not retriable(exc) or (max_attempts is not None and attempt >= max_attempts):
                raise
            delay = backoff.delay_s(attempt - 1)
            if deadline is not None and loop.time() + delay > deadline:
                raise
            await asyncio.sleep(delay)


class DeadlineBackoff:
    """Bounded exponential backoff: ``wait`` sleeps, or raises the error once the next
    sleep would pass the deadline. The clock and the sleep are injected (tests drive a
    manual clock); by default the monotonic clock and ``asyncio.sleep``."""

    def __init__(
        self,
        initial_s: float,
        max_s: float,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.delay = initial_s
        self.max_s = max_s
        self._clock = clock
        self._sleep = sleep
        self.deadline = clock() + timeout_s

    async def wait(self, error: BaseException) -> None:
        if self._clock() + self.delay > self.deadline:
            raise error
        await self._sleep(self.delay)
        self.delay = min(self.delay * 2, self.max_s)
