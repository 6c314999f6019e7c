"""Signal a subprocess when this process dies, however it dies (SIGKILL included).

Brokers started by tests and benches run in sessions of their own (a test's ``kill -9``
takes the broker's children too, and Ctrl-C reaches only the runner, which stops them
in order), so nothing stops them when the runner itself is killed: they outlive it.
The kernel's parent-death signal (``PR_SET_PDEATHSIG``) follows the *thread* that
started the child, and tests start brokers from threads, so instead a small shell, in
a session of its own too, waits on a pipe that only this process holds. The kernel
closes the pipe when this process exits, the shell's ``read`` returns and it sends the
signal. ``release`` ends the shell first, so a pid reused after the child is gone is
never signalled.
"""

from __future__ import annotations

import signal
import subprocess

# $0 is the pid. With a process group, "-$0" names the group the child leads.
_WATCH_SCRIPT = 'read -r _; kill -s "$1" -- "$0"'


class ParentDeathWatch:
    """While held, ``sig`` goes to ``pid`` (to its whole process group with
    ``process_group``, for a child started with ``start_new_session``) if this process
    dies before ``release``."""

    def __init__(
        self, pid: int, sig: signal.Signals = signal.SIGKILL, *, process_group: bool = False
    ) -> None:
        target = f"-{pid}" if process_group else str(pid)
        self._watcher: subprocess.Popen[bytes] | None = subprocess.Popen(
            ["sh", "-c", _WATCH_SCRIPT, target, sig.name.removeprefix("SIG")],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.poll() is None

    def release(self) -> None:
        """Stop watching: the shell is killed before its pipe closes, so it sends nothing."""
        watcher, self._watcher = self._watcher, None
        if watcher is None:
            return
        watcher.kill()
        watcher.wait()
        assert watcher.stdin is not None
        watcher.stdin.close()
