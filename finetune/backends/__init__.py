"""Backends: where a Plan runs. One folder each behind one Protocol (base.Backend); this
registry is the only place that lists their names. It imports base (pydantic) only inside the
functions that need it: the local run's supervisor imports this package and needs none of it
(docs/decisions/042-local-supervisor-import.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from finetune.errors import UsageError
from finetune.registry import Registry

if TYPE_CHECKING:
    from finetune.backends.base import Backend, Capabilities, Hooks

# a backend's module (and its SDK) is imported only when asked for
BACKENDS: Registry[type[Backend]] = Registry("backend", UsageError)
BACKENDS.add("local", "finetune.backends.local.backend:LocalBackend")
BACKENDS.add("sagemaker", "finetune.backends.sagemaker.backend:SageMakerBackend")
BACKENDS.add("ec2", "finetune.backends.ec2.backend:Ec2Backend")
NAMES = BACKENDS.names
DEFAULT = NAMES[0]  # where a launch runs unless told: this machine
# where an --instance type runs when no --backend is given: by its name's prefix, first match
INSTANCE_OWNERS = (("ml.", "sagemaker"), ("", "ec2"))


def implied(name: str | None, instance: str | None) -> tuple[str | None, str]:
    """(backend, note): ``name`` as given; without one, an instance type names the cloud
    (ml.* is SageMaker's, any other EC2's: INSTANCE_OWNERS) and the note says so; without
    either, the default (this machine)."""
    if name or not instance:
        return name, ""
    owner = next(n for prefix, n in INSTANCE_OWNERS if instance.startswith(prefix))
    return owner, f"--instance {instance}: on the {owner} backend (--backend picks another)"


def backend_class(name: str | None) -> type[Backend]:
    """The class of backend ``name`` (None: the default); an unknown name is a UsageError
    with a suggestion."""
    return BACKENDS.get(name or DEFAULT)


def get_backend(name: str | None, options: Any = None, hooks: Hooks | None = None) -> Backend:
    """Backend ``name``, with its options (a dict of launch flags or its options model; None
    for a run already launched: the backend reads what it stored) and hooks."""
    # deferred: the local supervisor imports this package and needs no pydantic (decision 042)
    from finetune.backends.base import Hooks

    cls = backend_class(name)
    if isinstance(options, dict):
        options = options_for(name, options)
    return cls(options=options, hooks=hooks or Hooks())


def options_for(name: str | None, flags: dict[str, Any]):
    """Backend ``name``'s options model filled from the launch ``flags`` it was given; a flag
    that belongs to other backends only is refused, naming them."""
    from pydantic import ValidationError

    name = name or DEFAULT
    model = backend_class(name).Options
    flags = given(flags)
    foreign = sorted(set(flags) - set(model.model_fields))
    if foreign:
        owners = {
            f: [n for n in NAMES if f in backend_class(n).Options.model_fields] for f in foreign
        }
        names = ", ".join(flag(f) for f in foreign)
        where = "; ".join(f"{flag(f)}: {', '.join(o) or 'none'}" for f, o in owners.items())
        raise UsageError(
            f"{names} {'does' if len(foreign) == 1 else 'do'} not apply to --backend {name}",
            f"drop {'it' if len(foreign) == 1 else 'them'}, or choose a backend that takes "
            f"{'it' if len(foreign) == 1 else 'them'} ({where}).",
        )
    try:
        return model.model_validate(flags)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = flag(str(first["loc"][0])) if first["loc"] else f"--backend {name}"
        raise UsageError(
            f"{where}: {first['msg'].removeprefix('Value error, ')}",
            f"see `finetune launch --help` for what {where} takes.",
        ) from None


# -- what a sweep asks of the registry ------------------------------------------------------
def on_this_machine(name: str) -> bool:
    """True for a backend that trains on this machine: runs there share its processors, so
    they must not run side by side where throughput is measured (a sweep runs one at a time)."""
    return backend_class(name).capabilities.on_this_machine  # unknown name: UsageError


def check_name(name: str) -> None:
    """UsageError (with a suggestion) for a backend name that does not exist."""
    backend_class(name)


def default_backend(name: str) -> Backend:
    """The backend ``name`` with its default options (what a sweep launches every cell on)."""
    return get_backend(name, options={})


def priced() -> list[tuple[str, str, Capabilities]]:
    """(name, price book, capabilities) of every backend that bills by a cloud price book:
    what `finetune plan` enumerates, so the planner never names a backend."""
    out: list[tuple[str, str, Capabilities]] = []
    for name in NAMES:
        cls = backend_class(name)
        if cls.price_book:
            out.append((name, cls.price_book, cls.capabilities))
    return out


def live_spot_prices(name: str, instance_types: list[str], region: str) -> dict:
    """{instance type: catalog.spot.SpotPrice} now, from backend ``name``'s cloud where it
    has a spot market with prices to read (needs credentials); {} where it has none."""
    backend = default_backend(name)
    reader = getattr(backend, "current_spot_prices", None)
    return reader(instance_types, region) if reader else {}


def launch_flags(name: str, region: str) -> tuple[str, ...]:
    """How a `finetune launch` command line sends backend ``name`` to ``region``: its
    --region flag where it takes one, else the FINETUNE_REGION setting it reads."""
    if "region" in backend_class(name).Options.model_fields:
        return ("--region", region)
    return (f"FINETUNE_REGION={region}",)


def instance_resources(name: str, instance: str, count: int = 1, spot: bool = False):
    """Plan resources for ``count`` instances of ``instance`` on backend ``name``, as that
    backend turns a launch's --instance/--count/--spot into resources."""
    from finetune.backends.base import ResourceRequest  # deferred: as in get_backend

    request = ResourceRequest(instance=instance, count=count, spot=spot)
    return default_backend(name).resources(request)


def with_readiness() -> list[str]:
    """The backends `finetune check` asks: those with a ``readiness(aws, instance, spot)``
    method (the items of finetune.aws.readiness they need: an account's); the others need
    nothing beyond this machine."""
    return [name for name in NAMES if hasattr(backend_class(name), "readiness")]


def readiness(name: str, aws, instance: str | None = None, spot: bool = False) -> list:
    """Backend ``name``'s readiness items in ``aws``'s account and region, for ``instance``
    (None: the backend's usual GPU type)."""
    backend = backend_class(name)(options=None)
    items = getattr(backend, "readiness", None)  # a method of the backends with_readiness names
    return [] if items is None else items(aws, instance, spot)


def flag(name: str) -> str:
    """'security_group' -> '--security-group'."""
    return "--" + name.replace("_", "-")


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The options a user actually gave (None, False and empty lists mean 'not given'). A
    zero is given: ``0 == False``, so the test is by identity (--max-eur 0 is a cap, and
    --max-restarts 0 means none, never the default)."""
    return {k: v for k, v in options.items() if not _absent(v)}


def _absent(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, tuple | list) and not value)
