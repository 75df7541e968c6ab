"""A connection's buffers: lent, given back, lent again; let go of when idle or closed."""

from __future__ import annotations

from jupyter_fsbroker.core.buffers import BufferPool

MiB = 1024 * 1024


def test_a_buffer_given_back_is_lent_again() -> None:
    pool = BufferPool()
    answer = 1_398_250  # a 1 MiB chunk's answer
    first = pool.take(answer)
    assert len(first) >= answer
    pool.give(first)
    again = pool.take(answer + 3)  # the next chunk's answer, a few bytes longer, fits it
    assert again is first and pool.made == 1


def test_the_smallest_buffer_that_fits_is_lent_and_a_larger_need_gets_a_new_one() -> None:
    pool = BufferPool()
    small, large = pool.take(MiB), pool.take(3 * MiB)
    pool.give(large)
    pool.give(small)
    assert pool.take(MiB) is small
    assert pool.take(4 * MiB) is not large and pool.made == 3
    assert pool.take(2 * MiB) is large


def test_at_most_keep_buffers_are_kept_the_smallest_let_go_first() -> None:
    pool = BufferPool(keep=2)
    buffers = [pool.take(size * MiB) for size in (1, 2, 3)]
    for buffer in buffers:
        pool.give(buffer)
    assert pool.kept == len(buffers[1]) + len(buffers[2])


def test_idle_buffers_are_let_go_and_a_closed_pool_keeps_nothing() -> None:
    pool = BufferPool(idle=0.0)
    pool.give(pool.take(MiB))
    assert pool.kept >= MiB
    pool.discard_idle()
    assert pool.kept == 0
    busy = BufferPool(idle=3600.0)
    busy.give(busy.take(MiB))
    busy.discard_idle()
    assert busy.kept >= MiB  # taken a moment ago: kept for the next chunk
    busy.close()
    assert busy.kept == 0
    busy.give(bytearray(MiB))
    assert busy.kept == 0
