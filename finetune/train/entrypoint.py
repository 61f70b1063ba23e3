"""The container entrypoint: ``python -m finetune.train [train]`` on an /opt/ml tree. Exit 0:
done, the model written; 75 (EXIT_STOPPED): stopped with a checkpoint saved, unfinished;
otherwise the FinetuneError's code, with the reason in /opt/ml/output/failure. The same command
starts or joins a torch run of several processes (docs/trainer.md: the entrypoint)."""

from __future__ import annotations

import logging
import os
import sys
import traceback

from finetune.contracts.container import (
    EXIT_STOPPED,
    STARTING,
    Layout,
    mark_stopped,
    model_written,
    read_stopped,
    stopped_file,
)
from finetune.contracts.engine import EngineRuntime
from finetune.contracts.engine import runtime as engine_runtime
from finetune.errors import FinetuneError
from finetune.train.engine_api import Launched
from finetune.train.layout import load_job
from finetune.train.signals import StartupStopped, StopRequest, survive_lost_output

USAGE = "usage: python -m finetune.train [train]   (inputs: the /opt/ml tree, or $FINETUNE_ML_ROOT)"
HELP = f"""Train as the /opt/ml tree says (FINETUNE_ML_ROOT moves it). SageMaker starts a
bring-your-own image as `docker run IMAGE train`: a leading `train` is accepted and ignored.
Exit codes: 0 done, the model written; {EXIT_STOPPED} stopped by SIGTERM/SIGINT with a checkpoint
saved, unfinished (the next start resumes); otherwise the error's code (1 unexpected), with
the reason in /opt/ml/output/failure."""
FAILURE_LIMIT = 1024  # SageMaker shows this much of the failure file as FailureReason


def main(argv: list[str] | None = None) -> int:
    """Run the training job the /opt/ml tree describes; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["train"]:
        args = args[1:]
    if args in (["-h"], ["--help"]):
        print(HELP + "\n\n" + USAGE)
        return 0
    if args:
        print(f"unexpected arguments {args}\n{USAGE}", file=sys.stderr)
        return 2
    survive_lost_output()  # before logging binds sys.stderr
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    layout = Layout.from_env()
    if _rank() is None:  # (a worker of torchrun: the launcher did it; a sibling may have failed)
        layout.failure_file.unlink(missing_ok=True)  # a stale reason from an earlier attempt
        stopped_file(layout.root).unlink(missing_ok=True)  # and its stop marker
    runtime: EngineRuntime | None = None  # known once the job is read
    try:
        # first thing: a stop during start-up is honoured too, and until the engine has
        # imported it ends the trainer at once (torchrun's workers stop together, in the loop)
        with StopRequest(starting=_rank() is None) as stop:
            job = load_job(layout)
            runtime = engine_runtime(job.hparams.engine)
            result = runtime.fit(job, stop)  # (each engine starts its own processes)
    except StartupStopped as exc:
        reason = mark_stopped(layout.root, exc.signal_name, STARTING)
        print(reason, file=sys.stderr, flush=True)
        _write_reason(layout, reason, None)
        return EXIT_STOPPED
    except FinetuneError as exc:
        return _fail(layout, str(exc), exc.exit_code, runtime)
    except Exception as exc:
        detail = traceback.format_exc()
        reason = f"unexpected error: {type(exc).__name__}: {exc}\n\n{detail}"
        return _fail(layout, reason, 1, runtime)
    _report(job, layout, result)
    return _outcome(job, layout, result)


def _outcome(job, layout: Layout, result) -> int:
    """The exit code of a run that raised nothing: EXIT_STOPPED (and the marker) when a signal
    stopped it, 0 when it finished -- and only with its model written, so that no reader can
    ever record a finished run without one."""
    rank = _rank()
    if result.stopped_by:
        if rank not in (None, 0):
            # rank 0 saves the checkpoint and speaks for the run; were this worker to exit
            # non-zero first, torchrun's agent would kill rank 0 in the middle of its save
            return 0
        if not isinstance(result, Launched):
            progress = result.progress
            where = f"epoch {progress.epoch + 1}, batch {progress.batch}, step {progress.step}"
        else:  # the launcher of torchrun's workers: rank 0 said where
            where = (read_stopped(layout.root) or {}).get("where") or "the newest checkpoint"
        reason = mark_stopped(layout.root, result.stopped_by, where)
        print(reason, file=sys.stderr, flush=True)
        _write_reason(layout, reason, rank)
        return EXIT_STOPPED
    if rank in (None, 0) and job.is_first_host and not model_written(layout.model_dir):
        return _fail(
            layout,
            f"the trainer ended without a stop and without writing the model into "
            f"{layout.model_dir}; the run is not finished",
            1,
            None,
        )
    return 0


def _report(job, layout: Layout, result) -> None:
    """The last line: how the run ended (once per host: torchrun's workers other than rank 0
    leave it to rank 0 and to the launcher)."""
    # (several hosts: the first one writes the model and the checkpoints)
    where = layout.model_dir if job.is_first_host else f"{min(job.hosts)}'s {layout.model_dir}"
    if isinstance(result, Launched):  # this process started the run's processes
        ended = f"stopped by {result.stopped_by}" if result.stopped_by else "ended"
        print(
            f"torchrun: {result.processes} of {result.world} training processes {ended}",
            flush=True,
        )
    elif _rank() not in (None, 0):
        return
    elif result.stopped_by:
        print(f"stopped by {result.stopped_by}, checkpoint saved", flush=True)
    else:
        print(
            f"training complete: {len(result.progress.events)} epoch(s), model in {where}",
            flush=True,
        )


def _rank() -> int | None:
    """This process's rank in a torchrun run of several processes (None: not one)."""
    if int(os.environ.get("WORLD_SIZE") or 1) <= 1 or "RANK" not in os.environ:
        return None
    return int(os.environ["RANK"])


def _fail(layout: Layout, reason: str, code: int, runtime: EngineRuntime | None) -> int:
    """Print the reason and write it where SageMaker reads the FailureReason from; then the
    engine (when known) may end the process at once (a multi-host MXNet job's kvstore)."""
    rank = _rank()
    if rank is not None:  # the first of torchrun's processes to fail names the cause
        reason = f"training process rank {rank}: {reason}"
    print(f"training failed: {reason}", file=sys.stderr, flush=True)
    _write_reason(layout, reason, rank)
    if runtime is not None:
        runtime.after_failure(code)
    return code


def _write_reason(layout: Layout, reason: str, rank: int | None) -> None:
    """The reason into the failure file, where SageMaker reads FailureReason from."""
    try:
        layout.failure_file.parent.mkdir(parents=True, exist_ok=True)
        with open(layout.failure_file, "x" if rank is not None else "w", encoding="utf-8") as f:
            f.write(reason + "\n")
    except FileExistsError:
        pass  # another process failed first (this one may only have lost its peer)
    except OSError as exc:  # an unwritable output folder must not hide the real reason
        print(f"(could not write {layout.failure_file}: {exc})", file=sys.stderr)
