"""The time limit of one reward call: a block that outlasts its seconds raises RewardTimeoutError (a hang).

A watcher thread signals the main thread when time is up, so a pure-Python loop or a blocking call is
interrupted; off the main thread, or where POSIX signals are missing, there is no limit.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from workbench.spec.rewards.reward_errors import RewardTimeoutError

# The guard's timer signal. Not SIGALRM: math_verify (TRL's accuracy rewards) times its own parsing with
# signal.alarm and cancels any alarm already set when it returns, so an ITIMER_REAL timer around a reward
# that uses it would be gone after its first parse.
TIMER_SIGNAL = getattr(signal, "SIGUSR2", None)


class _Deadline:
    """One guarded block's timer: a watcher thread that signals the main thread if the block outlasts it."""

    def __init__(self, seconds: float, name: str):
        self.seconds, self.name = seconds, name
        self.armed = True
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=f"reward-timer-{name}", daemon=True)

    def _watch(self) -> None:
        if not self.done.wait(self.seconds):
            with self.lock:
                if self.armed:
                    signal.pthread_kill(threading.main_thread().ident, TIMER_SIGNAL)

    def expired(self, signum, frame) -> None:
        # a signal that arrives after the block ended (sent as it returned) is ignored
        if self.armed:
            self.armed = False
            raise RewardTimeoutError(
                self.name,
                f"did not return within {self.seconds:g} s (reward_timeout_s); "
                "make it faster, or raise reward_timeout_s if it is slow by design",
            )

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
        self.done.set()
        self.thread.join()


@contextmanager
def time_limit(seconds: float | None, name: str):
    """Raise RewardFunctionError in the block after `seconds` of wall time (main thread, POSIX; elsewhere no limit).

    A watcher thread sends TIMER_SIGNAL to the main thread when time is up: it
    interrupts pure-Python loops and blocking calls (a sleep, a socket read),
    which is what a hung reward usually is, and it survives what a reward
    does with SIGALRM (math_verify's own timeouts).
    """
    if (
        not seconds
        or TIMER_SIGNAL is None
        or threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "pthread_kill")
    ):
        yield
        return
    deadline = _Deadline(seconds, name)
    previous = signal.signal(TIMER_SIGNAL, deadline.expired)
    deadline.thread.start()
    try:
        yield
    finally:
        deadline.disarm()
        signal.signal(TIMER_SIGNAL, previous)
