"""Where the hosts of a multi-host run find the first one (engine-neutral): MXNet's parameter
server scheduler (finetune.train.engines.mxnet.cluster) and torchrun's master
(finetune.train.engines.torch.launch) both run there.

``FINETUNE_HOST_ADDRESS_OVERRIDE`` maps every host to one address (for tests);
``FINETUNE_HOST_ADDRESSES``, a JSON map of names to addresses, names them one by one, as the
EC2 agent does; otherwise the name resolves through socket.gethostbyname.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping

from finetune.contracts.container import ADDRESS_OVERRIDE_ENV, ADDRESSES_ENV
from finetune.errors import ConfigError


def first_host_address(
    hosts: tuple[str, ...] | list[str],
    environ: Mapping[str, str],
    resolve: Callable[[str], str] = socket.gethostbyname,
    role: str = "the first host",
) -> str:
    """The address of the first of the sorted ``hosts`` (every host agrees on it): the
    override, the EC2 agent's map, else name resolution. ``role`` names it in errors."""
    first = sorted(hosts)[0]
    override = environ.get(ADDRESS_OVERRIDE_ENV) or _mapped(environ.get(ADDRESSES_ENV), first)
    try:
        return override or resolve(first)
    except OSError as exc:
        raise ConfigError(
            f"cannot resolve the first host {first!r} ({role}): {exc}",
            "every host must resolve the names in resourceconfig.json (SageMaker's do).",
        ) from None


def _mapped(text: str | None, host: str) -> str | None:
    """``host``'s address in the JSON map of FINETUNE_HOST_ADDRESSES, if it names one."""
    if not text:
        return None
    try:
        value = json.loads(text).get(host)
    except (ValueError, AttributeError):
        raise ConfigError(
            f"{ADDRESSES_ENV} is not a JSON object of host names to addresses",
            f'set it like {ADDRESSES_ENV}=\'{{"algo-1": "10.0.0.5"}}\', or unset it.',
        ) from None
    return str(value) if value else None
