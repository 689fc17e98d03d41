"""In-process seams of the CLI's trio plumbing: nursery errors and the Ctrl-C watcher."""

from __future__ import annotations

import signal

import pytest
import trio
import trio.testing

from prism.cli._trio import only_leaf, run_trio, watch_interrupts


def test_run_trio_returns_the_value() -> None:
    async def answer() -> int:
        return 42

    assert run_trio(answer) == 42


def test_one_error_from_a_nursery_is_raised_as_itself() -> None:
    async def fails() -> None:
        async def boom() -> None:
            raise ValueError("the one failure")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(boom)

    with pytest.raises(ValueError, match="the one failure") as raised:
        run_trio(fails)
    assert isinstance(raised.value.__cause__, BaseExceptionGroup)


def test_several_errors_stay_a_group() -> None:
    async def fails() -> None:
        async def boom(message: str) -> None:
            raise ValueError(message)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(boom, "first")
            nursery.start_soon(boom, "second")

    with pytest.raises(BaseExceptionGroup) as raised:
        run_trio(fails)
    assert sorted(str(e) for e in raised.value.exceptions) == ["first", "second"]


def test_only_leaf_looks_through_nesting() -> None:
    leaf = KeyError("deep")
    nested = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [leaf])])
    assert only_leaf(nested) is leaf
    two = BaseExceptionGroup("outer", [ValueError("a"), BaseExceptionGroup("i", [KeyError()])])
    assert only_leaf(two) is None


async def test_ctrl_c_and_sigterm_call_the_handler_and_the_block_goes_on() -> None:
    calls: list[int] = []

    def on_interrupt(signum: int) -> bool:
        calls.append(signum)
        return True

    with trio.fail_after(30):
        async with watch_interrupts(on_interrupt) as interrupts:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.raise_signal(signum)  # the watcher holds both as soon as it is entered
                while signum not in calls:
                    await trio.testing.wait_all_tasks_blocked()
            finished = True
    assert calls == [signal.SIGINT, signal.SIGTERM]
    assert interrupts.received == calls
    assert finished


async def test_ctrl_c_the_handler_refuses_cancels_the_block_and_raises() -> None:
    reached_end: list[bool] = []

    async def block() -> None:
        async with watch_interrupts(lambda signum: False):
            signal.raise_signal(signal.SIGTERM)
            await trio.sleep_forever()  # cancelled by the watcher
            reached_end.append(True)

    with trio.fail_after(30), pytest.raises(KeyboardInterrupt):
        await block()
    assert not reached_end


async def test_off_the_main_thread_nothing_is_watched() -> None:
    async def in_thread() -> bool:
        async with watch_interrupts(lambda signum: False):
            return True

    assert await trio.to_thread.run_sync(lambda: trio.run(in_thread))
