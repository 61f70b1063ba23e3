"""Encode many images in parallel into one scratch file, in input order.

Workers (processes) read and encode; the parent appends results to a scratch file in the
order of the inputs, so the bytes are the same for any number of workers. Records are later
copied from the scratch file into the split .rec files once the split is known (a corrupt
image must not take a training slot).

Ctrl-C: a terminal sends SIGINT to the whole process group. Workers ignore it (SIGINT is
blocked from before the fork until the worker has set it to ignored, so a worker never takes
a KeyboardInterrupt half-started); the parent notes it, raises KeyboardInterrupt at its next
wait for a result (within 0.1 s) and kills the workers. Workers close the descriptors they
must not keep (the output folder's lock) and die with the parent.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import stat
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from finetune.data.imaging import Encoded, ImageOptions, encode
from finetune.data.interrupts import POLL_S, sigint_blocked, sigint_deferred
from finetune.errors import FinetuneError


@dataclass(frozen=True)
class Slot:
    """Where an encoded image sits in the scratch file, or why it is not there."""

    offset: int
    length: int
    reason: str | None = None
    size: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


_ROOT: Path | None = None
_OPTS: ImageOptions | None = None


def _init(root: Path, opts: ImageOptions) -> None:
    global _ROOT, _OPTS
    _ROOT, _OPTS = root, opts


def _init_worker(root: Path, opts: ImageOptions, parent: int, close_fds: tuple[int, ...]) -> None:
    """A worker's start: ignore Ctrl-C, die with the parent, drop the parent's lock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _die_with_parent(parent)
    for fd in close_fds:
        with suppress(OSError):
            os.close(fd)
    _init(root, opts)


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when its parent ends (and now, if it already has)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _work(rel: str) -> Encoded:
    assert _ROOT is not None and _OPTS is not None
    try:
        data = read_regular(_ROOT / rel)
    except OSError as exc:
        return Encoded(None, f"unreadable: {exc.strerror or exc}")
    if data is None:
        return Encoded(None, "not a regular file (a FIFO, socket or device): not read")
    return encode(data, _OPTS)


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file, else None. Opened without blocking
    first: opening a FIFO for reading would otherwise wait forever for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read()


def default_workers() -> int:
    """One worker per CPU this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def encode_iter(
    root: Path,
    rels: list[str],
    opts: ImageOptions,
    workers: int,
    close_fds: tuple[int, ...] = (),
) -> Generator[Encoded, None, None]:
    """Yield the encoding of each relative path, in order, using ``workers`` processes.

    ``close_fds``: descriptors the workers close at once (see the module docstring)."""
    if workers <= 1 or len(rels) < 2:
        _init(root, opts)
        yield from map(_work, rels)
        return
    # fork: workers start in milliseconds and inherit nothing heavy (no MXNet is imported here).
    fork = "fork" in mp.get_all_start_methods()
    ctx = mp.get_context("fork") if fork else mp.get_context("spawn")
    chunk = max(1, min(16, len(rels) // (workers * 8) or 1))
    spans = [(i, min(i + chunk, len(rels))) for i in range(0, len(rels), chunk)]
    crew: list[tuple[BaseProcess, Connection]] = []
    finished = False
    with sigint_deferred() as pressed:
        try:
            with sigint_blocked():
                for _ in range(min(workers, len(spans))):
                    ours, theirs = ctx.Pipe()
                    args = (theirs, root, opts, os.getpid(), tuple(close_fds), rels)
                    proc = ctx.Process(target=_serve, args=args, daemon=True)
                    proc.start()
                    theirs.close()
                    crew.append((proc, ours))
            yield from _in_order(crew, spans, pressed)
            finished = True
        finally:
            _dismiss(crew, finished)


# Spans handed to a worker ahead of the one awaited: enough that no worker waits for work
# while the parent writes, and few enough that the tasks (two integers each) never fill the
# pipe to it, so that the parent never blocks handing out work.
_AHEAD = 4


def _in_order(
    crew: list[tuple[BaseProcess, Connection]],
    spans: list[tuple[int, int]],
    pressed: Callable[[], bool],
) -> Iterator[Encoded]:
    """Each span's encodings, in input order: span i goes to worker i mod N.

    Why not multiprocessing.Pool: its helper threads and queue locks are where Ctrl-C
    broke it (a KeyboardInterrupt inside ``Condition.wait`` left a lock released; a
    ``terminate`` waited forever for a thread blocked writing tasks into a full pipe whose
    readers were gone), and a worker killed from outside leaves ``imap`` waiting forever.
    Here the parent has no threads and no locks: a pipe to each worker, and a worker that
    dies is an error at once."""
    sent = min(len(spans), _AHEAD * len(crew))
    for i in range(sent):
        _hand(crew, spans, i)
    for i in range(len(spans)):
        proc, conn = crew[i % len(crew)]
        done = _receive(proc, conn, pressed)
        if sent < len(spans):
            _hand(crew, spans, sent)
            sent += 1
        yield from done


def _receive(proc: BaseProcess, conn: Connection, pressed: Callable[[], bool]) -> list[Encoded]:
    """The worker's next result; KeyboardInterrupt, raised here, once Ctrl-C was pressed."""
    while not conn.poll(POLL_S):
        if pressed():
            raise KeyboardInterrupt
    try:
        got = conn.recv()
    except (EOFError, OSError):  # its end closed, or reset as it died
        raise _lost(proc) from None
    if isinstance(got, BaseException):
        raise got
    if pressed():
        raise KeyboardInterrupt
    return got


def _lost(proc: BaseProcess) -> FinetuneError:
    proc.join(timeout=1)  # for its exit code
    return FinetuneError(
        f"an image-encoding worker (pid {proc.pid}) ended without its result, "
        f"exit code {proc.exitcode} (killed from outside, or out of memory)",
        "run the same command again: nothing was published and it starts over; "
        "where memory is short, with fewer --workers.",
    )


def _hand(crew: list[tuple[BaseProcess, Connection]], spans: list[tuple[int, int]], i: int) -> None:
    """Send span ``i`` to its worker."""
    proc, conn = crew[i % len(crew)]
    try:
        conn.send(spans[i])
    except OSError:
        raise _lost(proc) from None


def _serve(
    conn: Connection,
    root: Path,
    opts: ImageOptions,
    parent: int,
    close_fds: tuple[int, ...],
    rels: list[str],
) -> None:
    """A worker: encode the spans of ``rels`` it is sent, until it is sent None (or its pipe
    closes: the workers forked after it hold copies of the parent's end, so a close alone
    does not reach it)."""
    _init_worker(root, opts, parent, close_fds)
    while True:
        try:
            span = conn.recv()
        except EOFError:
            return
        if span is None:
            return
        try:
            conn.send([_work(rel) for rel in rels[span[0] : span[1]]])
        except Exception as exc:  # the parent raises it: a bug, not a bad image
            conn.send(exc)


def _dismiss(crew: list[tuple[BaseProcess, Connection]], finished: bool) -> None:
    """End the workers: asked to after a whole run, killed otherwise (they hold nothing:
    the output lock was closed in each at its start)."""
    for proc, conn in crew:
        if finished:
            with suppress(OSError):
                conn.send(None)
        else:
            proc.kill()
        conn.close()
    for proc, _ in crew:
        proc.join(timeout=None if not finished else 10)
        if proc.exitcode is None:
            proc.kill()
            proc.join()


def encode_to_scratch(
    root: Path,
    rels: list[str],
    opts: ImageOptions,
    scratch: Path,
    workers: int,
    advance: Callable[[int], None] | None = None,
    close_fds: tuple[int, ...] = (),
) -> list[Slot]:
    """Encode every path into ``scratch``; returns one Slot per path, in order."""
    slots: list[Slot] = []
    offset = 0
    results = encode_iter(root, rels, opts, workers, close_fds)
    with open(scratch, "wb") as out, closing(results):  # closing: the pool ends here
        for result in results:
            if result.data is None:
                slots.append(Slot(offset, 0, result.reason))
            else:
                out.write(result.data)
                slots.append(Slot(offset, len(result.data), None, result.size))
                offset += len(result.data)
            if advance:
                advance(1)
    return slots
