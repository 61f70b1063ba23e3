"""The epoch loop keeps its protocol: it calls a session's members and never probes for them;
both engines' sessions provide every member; the null group and the no-op telemetry of a run
of one process; one list of engine names that every per-engine table covers."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from finetune.catalog.engines import BUILDS
from finetune.contracts.engine import EngineRuntime, runtime
from finetune.engines.models import AUGMENTATIONS, MODELS
from finetune.engines.registry import NAMES
from finetune.train import engine_api, fitloop
from finetune.train.signals import StopRequest
from finetune.train.telemetry import NoTelemetry, Telemetry

SESSIONS = {
    "mxnet": ("finetune.train.engines.mxnet.session", "MXNetSession"),
    "torch": ("finetune.train.engines.torch.session", "TorchSession"),
}


def test_the_fit_loop_never_probes_a_session():
    tree = ast.parse(Path(fitloop.__file__).read_text(encoding="utf-8"))
    probes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
    ]
    assert probes == []


def _members(cls) -> tuple[list[str], list[str]]:
    """(the protocol's attributes -- annotated, or read-only properties --, its methods)."""
    methods = [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")]
    properties = [n for n, v in vars(cls).items() if isinstance(v, property)]
    return [*cls.__annotations__, *properties], methods


@pytest.mark.parametrize("engine", list(SESSIONS))
def test_every_session_provides_the_whole_protocol(engine):
    module, name = SESSIONS[engine]
    needs = {"mxnet": ("mxnet",), "torch": ("torch", "torchvision")}[engine]
    for lib in needs:
        if importlib.util.find_spec(lib) is None:
            pytest.skip(f"{lib} is not installed")
    cls = getattr(importlib.import_module(module), name)
    source = inspect.getsource(cls)
    attributes, methods = _members(engine_api.Session)
    assert {"files", "devices", "hosts", "is_first_host", "group", "telemetry"} <= set(attributes)
    for attribute in attributes:  # set on the instance, in __init__ or build (or a property)
        if isinstance(inspect.getattr_static(cls, attribute, None), property):
            continue
        assert re.search(rf"self\.{attribute}\b[^=\n]*=", source), attribute
    for method in methods:
        assert callable(getattr(cls, method, None)), method
        wanted = list(inspect.signature(getattr(engine_api.Session, method)).parameters)
        given = list(inspect.signature(getattr(cls, method)).parameters)
        assert given[: len(wanted)] == wanted, method  # evaluate(..., shared) included


def test_one_process_decides_alone():
    group, stop = engine_api.OneProcess(), StopRequest()
    assert (group.world, group.local_rank) == (1, 0)
    assert group.agree(stop, True) == (False, True)
    assert group.agree(stop, False) == (False, False)
    stop.request("SIGTERM")
    assert group.agree(stop, False) == (True, False)
    assert stop.signal_name == "SIGTERM"


def test_no_telemetry_adds_nothing_and_says_nothing():
    quiet = NoTelemetry()
    quiet.start_timing()
    fields = quiet.epoch_fields(100.0, 2.0)  # the phases only (no begin_epoch: no warm-up)
    assert fields == {"warmup_seconds": None, "validation_seconds": None}
    assert quiet.summary(0, {"epoch": 0}) is None
    # the measuring one answers the same calls
    fields = Telemetry(precision="fp32").epoch_fields(100.0, 2.0)
    assert Telemetry(precision="fp32").summary(3, fields).startswith("finetune-telemetry epoch=3")


def test_one_list_of_engine_names_covers_every_table():
    for table in (MODELS, AUGMENTATIONS, BUILDS):
        assert tuple(table) == NAMES == ("mxnet", "torch")


@pytest.mark.parametrize("engine", NAMES)
def test_every_runtime_provides_the_whole_interface(engine):
    """Each engine's RUNTIME has every method of EngineRuntime, with its parameters (the
    type checker holds the types: RUNTIME is declared an EngineRuntime)."""
    given = runtime(engine)
    wanted = [n for n, v in vars(EngineRuntime).items() if callable(v) and not n.startswith("_")]
    assert set(wanted) == {"fit", "weights_source", "predict_scores", "export", "count_step",
                           "after_failure"}  # fmt: skip
    for name in wanted:
        expect = list(inspect.signature(getattr(EngineRuntime, name)).parameters)[1:]
        assert len(inspect.signature(getattr(given, name)).parameters) == len(expect), name
