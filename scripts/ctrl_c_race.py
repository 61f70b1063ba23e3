"""Does a Ctrl-C pressed as the follow loop starts its wait end that wait at once?

A child runs the follow loop's shape (a line, then the wait between two polls, the live
display on): with ``time.sleep`` (before) or ``Presses.wait`` (the wakeup pipe, now). The
parent presses Ctrl-C as each line appears and counts the presses acted on only when the
wait ended ("late"). ``--widen-us N`` preloads a shim that spins N microseconds in user space
just before the sleeping system call (clock_nanosleep, select): the thread preempted there,
as under load, made wide enough to hit (needs cc). docs/decisions/170-ctrl-c-sleep-race.md.

    PYTHONPATH=. python scripts/ctrl_c_race.py --presses 100 --widen-us 2000
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from finetune.cli._ctrl_c import ctrl_c_taken
from finetune.cli._progress import EpochDisplay

SHIM = Path(__file__).resolve().parents[1] / "tests" / "widen_sleep.c"  # the tests' shim


def child(mode: str, wait_s: float) -> None:
    """The follow loop's shape, kept alive across presses; 'KI' when a press is acted on."""
    with open(os.devnull, "w") as devnull:
        display = EpochDisplay(3, console=Console(file=devnull, force_terminal=True))
        display.start()  # rich's refresh thread runs, as while following
        _loop(mode, wait_s, display)


def _loop(mode: str, wait_s: float, display) -> None:
    def loop(wait) -> None:
        while True:
            try:
                display.echo("  running: Training")
                os.write(1, b"line\n")
                wait(wait_s)
            except KeyboardInterrupt:
                os.write(1, b"KI\n")

    if mode == "sleep":
        loop(time.sleep)
    with ctrl_c_taken() as presses:
        loop(presses.wait)


def press(mode: str, presses: int, wait_s: float, env: dict) -> str:
    cmd = [sys.executable, __file__, "--child", mode, "--wait", str(wait_s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, bufsize=0)
    assert proc.stdout.readline() == b"line\n"
    widen_s = int(env.get("WIDEN_US", "0")) / 1e6
    took = []
    for _ in range(presses):
        until = time.perf_counter() + random.uniform(0, widen_s)  # anywhere in the window
        while time.perf_counter() < until:
            pass
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == b"KI\n"
        took.append(time.monotonic() - start)
        assert proc.stdout.readline() == b"line\n"
    proc.kill()
    proc.wait()
    late = sum(t > wait_s / 2 for t in took)
    took.sort()
    return (f"{mode:6s} presses={presses} late={late} median={took[len(took) // 2] * 1000:.1f} ms "
            f"max={took[-1]:.3f} s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=["sleep", "wait"])
    ap.add_argument("--presses", type=int, default=100)
    ap.add_argument("--wait", type=float, default=1.0)
    ap.add_argument("--widen-us", type=int, default=0)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.wait)
        return
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if args.widen_us:
            subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", f"{tmp}/widen.so",
                            str(SHIM), "-ldl"], check=True)  # fmt: skip
            env.update(LD_PRELOAD=f"{tmp}/widen.so", WIDEN_US=str(args.widen_us))
        for mode in ("sleep", "wait"):
            print(press(mode, args.presses, args.wait, env), flush=True)


if __name__ == "__main__":
    main()
