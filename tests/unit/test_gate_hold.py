"""An agent op waiting behind a slow app call holds the app's other calls only briefly."""

from __future__ import annotations

import threading
import time

from memsync.agent.gate import WriteGate


def test_an_op_behind_a_slow_app_call_lets_the_other_app_calls_go_after_hold_s() -> None:
    gate = WriteGate()
    slow_started, waited = threading.Event(), []

    def slow_app_call() -> None:  # an add waiting on its LLM
        with gate.app_call(write=True):
            slow_started.set()
            time.sleep(0.6)

    def agent_op() -> None:
        with gate.exclusive(timeout_s=5.0, hold_s=0.1):
            pass

    def other_app_call() -> None:
        started = time.monotonic()
        with gate.app_call(write=False):
            waited.append(time.monotonic() - started)

    threads = [threading.Thread(target=slow_app_call), threading.Thread(target=agent_op)]
    threads[0].start()
    slow_started.wait(5)
    threads[1].start()
    time.sleep(0.02)  # the op is waiting now, holding new calls back
    other = threading.Thread(target=other_app_call)
    other.start()
    for thread in [*threads, other]:
        thread.join(5)
    assert waited and waited[0] < 0.4, f"the app's other call waited {waited[0]:.2f} s"
