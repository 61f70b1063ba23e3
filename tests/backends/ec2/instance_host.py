"""An EC2 instance booting the user data finetune sent, emulated on this machine.

What the instance has, and where it comes from:
- its own mount + UTS namespace (tests/namespaces.py): hostname ip-A-B-C-D, /opt/ml a folder
  of the test's, /opt/pytorch the stand-in for the PyTorch DLAMI's environment;
- the stand-in: a venv of this machine's Python whose only packages are the test
  environment's (torch, torchvision, numpy, boto3, pip ...), reached through a .pth line --
  finetune itself excluded, so it comes from the wheel the user data installs, and the real
  environment is never written (pip installs into the stand-in's own site-packages);
- the AWS CLI from PyPI (requirements/tools.lock, in .venv-tools) on the PATH, talking to moto
  (AWS_ENDPOINT_URL) with the instance role's credentials from the fake IMDS, which also
  gives the instance id and the spot notices (the agent's FINETUNE_AGENT_IMDS points at it);
- no package index (PIP_NO_INDEX): a boot that needs the network fails here;
- the only fakes: ``systemd-run``, ``systemctl`` and ``shutdown``, stubs on the PATH that
  append their command line to power.log.

The user data runs as cloud-init runs it (bash, as root, from /), with ``-x`` so the test
can read the order of what ran (boot.log).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests import namespaces

from .fake_imds import FakeImds

POWER_STUBS = ("systemd-run", "systemctl", "shutdown")
STUB = '#!/bin/bash\nprintf "%s\\n" "${0##*/} $*" >> "$EMU_POWER_LOG"\n'
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def make_standin(folder: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """The /opt/pytorch stand-in (see the module's docstring); returns its folder.
    ``leave_out``: distributions (lower-case name prefixes) the stand-in lacks besides ours."""
    site = Path(sysconfig.get_paths()["purelib"])
    shared = folder / "dlami-site"
    shared.mkdir(parents=True)
    for entry in site.iterdir():
        # the editable install of the checkout stays out
        if "finetune" not in entry.name and not entry.name.lower().startswith(leave_out):
            (shared / entry.name).symlink_to(entry)
    env = folder / "pytorch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)})
    Path(purelib, "dlami-environment.pth").write_text(f"{shared}\n")
    return env


def aws_cli() -> Path:
    """The AWS CLI of .venv-tools (scripts/setup.sh installs requirements/tools.lock there)."""
    here = Path(__file__).resolve().parents[3]
    for root in (here, Path(sys.executable).resolve().parents[2], Path(sys.prefix).parent):
        cli = root / ".venv-tools" / "bin" / "aws"
        if cli.exists():
            return cli
    found = shutil.which("aws")
    assert found, "no AWS CLI: run scripts/setup.sh (awscli is in requirements/tools.lock)"
    return Path(found)


@dataclass
class Instance:
    """One booted instance: its id, name, address, folder and process."""

    instance_id: str
    address: str
    root: Path
    imds: FakeImds
    proc: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return "ip-" + self.address.replace(".", "-")

    @property
    def ml(self) -> Path:
        return self.root / "ml"

    @property
    def log(self) -> str:
        return (self.root / "boot.log").read_text(errors="replace")

    def power(self) -> list[str]:
        """The stubs' records, in order."""
        path = self.root / "power.log"
        return path.read_text().splitlines() if path.exists() else []

    def commands(self) -> list[str]:
        """The commands of the user data itself, in order (its xtrace lines, one level
        deep), assignments left out."""
        out = []
        for line in self.log.splitlines():
            if line.startswith("+ ") and not line.startswith("++"):
                word = line[2:].split(" ", 1)[0]
                if "=" not in word:
                    out.append(line[2:])
        return out

    def wait(self, timeout: float) -> int:
        """The user data's exit code; killed (with all it started) after ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            raise AssertionError(
                f"{self.name} still booting after {timeout} s:\n{self.log}"
            ) from None


def boot(
    user_data: str,
    instance: Instance,
    standin: Path | None,
    hosts: list[tuple[str, str]] | None = None,
    extra_env: dict | None = None,
) -> Instance:
    """Start ``user_data`` on ``instance`` (its folder is made here); returns at once.
    ``standin``: the PyTorch DLAMI's /opt/pytorch (None: an AMI without it)."""
    root = instance.root
    for sub in ("ml", "home", "stubs", "tools"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for stub in POWER_STUBS:
        (root / "stubs" / stub).write_text(STUB)
        (root / "stubs" / stub).chmod(0o755)
    (root / "tools" / "aws").symlink_to(aws_cli())
    script = root / "user-data.sh"
    script.write_text(user_data)
    hosts_file = namespaces.write_hosts(
        root / "hosts", hosts or [(instance.name, instance.address)]
    )
    env = {
        "PATH": f"{root / 'stubs'}:{root / 'tools'}:{SYSTEM_PATH}",
        "HOME": str(root / "home"),
        "LANG": "C.UTF-8",
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],  # moto, behind the fault layer
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": instance.imds.url + "/",
        "FINETUNE_AGENT_IMDS": instance.imds.url,
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,  # this machine's pip.conf is no DLAMI's
        "EMU_POWER_LOG": str(root / "power.log"),
        # this host's cores are the emulated instance's, shared with the other test workers:
        # their share (tests/conftest.py), as the trainers of every other test get it. Without
        # it each instance's trainer took every core: two intra-op threads on 2 cores, ~50 %
        # more CPU-seconds on 32 px kernels too small to split (demo: 98 against 67 CPU-s)
        **{k: os.environ[k] for k in ("OMP_NUM_THREADS",) if k in os.environ},
        **namespaces.environment(
            instance.name, hosts_file, root, instance.ml, {"pytorch": standin} if standin else {}
        ),
        **(extra_env or {}),
    }
    with open(root / "boot.log", "wb") as log:
        instance.proc = subprocess.Popen(
            namespaces.command(["bash", "-x", str(script)]),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return instance
