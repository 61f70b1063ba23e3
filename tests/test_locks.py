"""The locks (scripts/lock.py): the installed environment is exactly requirements/dev.lock, each
derived lock (EC2 boot, metrics, image, tools) pins what the dev lock pins, every entry is
hashed, and each lock was written from today's inputs. Nothing here asks a package index or
compares with what it serves: an upstream release cannot fail these tests, only a change of
ours (a hand `pip install`, an edited pyproject without `bash scripts/lock.sh`) can."""

from __future__ import annotations

import importlib.util
import re
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
REFRESH = "To fix: run `bash scripts/lock.sh`, then `bash scripts/setup.sh`."


def _lock_module():
    spec = importlib.util.spec_from_file_location("lock", ROOT / "scripts" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = _lock_module()
DERIVED = [lock.BOOT_LOCK, lock.METRICS_LOCK, lock.IMAGE_LOCK]
ALL = [lock.DEV_LOCK, *DERIVED, lock.TOOLS_LOCK]


def entries(path: Path) -> dict[str, tuple[str, str | None, list[str]]]:
    """canonical name -> (version, marker or None, hashes) of every entry of a lock."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        hashes = re.findall(r"--hash=sha256:([0-9a-f]+)", line)
        requirement = Requirement(re.sub(r"\s--hash=\S+", "", line).strip())
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{path.name}: {line[:60]} is not an exact pin"
        marker = str(requirement.marker) if requirement.marker else None
        out[lock.canonical(requirement.name)] = (spec.version, marker, hashes)
    return out


def installed(extra_paths: tuple[str, ...] = ()) -> dict[str, str]:
    """name -> version of what is installed in this environment's site-packages (not all of
    sys.path: setuptools puts its vendored packages there once imported); the first wins."""
    site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    out: dict[str, str] = {}
    for dist in metadata.distributions(path=[*extra_paths, *sorted(site)]):
        out.setdefault(lock.canonical(dist.metadata["Name"]), dist.version)
    return out


def drift(extra_paths: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(installed but not locked, locked but missing or at another version) in this
    environment; finetune itself is the checkout, installed editable, never in a lock."""
    pinned = {name: version for name, (version, _, _) in entries(lock.DEV_LOCK).items()}
    have = {n: v for n, v in installed(extra_paths).items() if n != "finetune"}
    extra = sorted(f"{n}=={v}" for n, v in have.items() if n not in pinned)
    wrong = sorted(f"{n}: lock {v}, installed {have.get(n)}" for n, v in pinned.items()
                   if have.get(n) != v)  # fmt: skip
    return extra, wrong


def test_the_environment_is_the_dev_lock_both_ways():
    extra, wrong = drift()
    assert not extra, (
        f"installed by hand, not in requirements/dev.lock: {', '.join(extra)}. To fix: add it "
        "to pyproject.toml or requirements/dev.in and run `bash scripts/lock.sh`, or "
        "`rm -rf .venv && bash scripts/setup.sh`."
    )
    assert not wrong, f"{'; '.join(wrong)}. To fix: `bash scripts/setup.sh` installs the lock."


def test_a_hand_install_is_drift(tmp_path):
    # what `pip install leftpad==1.0` and a changed pin leave in site-packages: their metadata
    for name, version in (("leftpad", "1.0"), ("typer", "0.0.1")):
        info = tmp_path / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    extra, wrong = drift(extra_paths=(str(tmp_path),))  # as if in site-packages
    assert extra == ["leftpad==1.0"]
    assert [w for w in wrong if w.startswith("typer:")] == [
        f"typer: lock {entries(lock.DEV_LOCK)['typer'][0]}, installed 0.0.1"
    ]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_lock_was_written_from_todays_inputs(path):
    assert lock.recorded_digest(path) == lock.inputs_digest(), (
        f"{path.relative_to(ROOT)} was written from other inputs than pyproject.toml's "
        f"dependency tables and requirements/*.in|txt as they are now. {REFRESH}"
    )


def test_the_input_digest_follows_the_dependency_tables_only(tmp_path):
    for name in ("pyproject.toml", *lock.INPUT_FILES):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    before = lock.inputs_digest(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("line-length = 100", "line-length = 99"))
    assert lock.inputs_digest(tmp_path) == before  # a lint setting: no relock
    pyproject.write_text(pyproject.read_text().replace('"typer>=0.12,<1"', '"typer>=0.13,<1"'))
    assert lock.inputs_digest(tmp_path) != before
    constraints = tmp_path / "requirements" / "constraints.txt"
    pyproject.write_text((ROOT / "pyproject.toml").read_text())
    constraints.write_text(constraints.read_text() + "six==1.16.0\n")
    assert lock.inputs_digest(tmp_path) != before


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_entry_is_pinned_and_hashed(path):
    found = entries(path)
    assert found
    for name, (_, _, hashes) in found.items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


@pytest.mark.parametrize("path", DERIVED, ids=lambda p: p.name)
def test_a_derived_lock_pins_what_the_dev_lock_pins(path):
    dev = entries(lock.DEV_LOCK)
    for name, (version, _, hashes) in entries(path).items():
        if name in dev:
            assert version == dev[name][0], f"{path.name}: {name} {version} != dev {dev[name][0]}"
            assert set(hashes) & set(dev[name][2]) or name == "mxnet-cu112", name


def test_the_cloud_locks_leave_the_images_own_packages_alone():
    for path in (lock.BOOT_LOCK, lock.METRICS_LOCK):
        assert not set(lock.AMI_OWNS) & set(entries(path)), path.name
    boot, metrics = entries(lock.BOOT_LOCK), entries(lock.METRICS_LOCK)
    assert not set(boot) & set(metrics)  # the boot installed those already
    assert {"boto3", "pydantic", "typer"} <= set(boot)  # the agent's and the CLI's
    assert {"tensorboardx", "mlflow-skinny", "sqlalchemy", "alembic"} <= set(metrics)


# the DLAMI's interpreter (torch 2.10's DLAMI: Python 3.12 on Linux x86_64); the boot lock is
# universal, so markers decide what an instance installs
DLAMI = {"python_version": "3.12", "python_full_version": "3.12.8", "sys_platform": "linux",
         "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
         "implementation_name": "cpython", "platform_python_implementation": "CPython",
         "extra": ""}  # fmt: skip


def closure(roots: list[str], markers: dict[str, str]) -> dict[str, str]:
    """name -> version of ``roots`` and everything they need, as installed here, minus the
    AMI's own packages: an oracle for the boot lock from the installed metadata, not from uv."""
    todo, seen = [Requirement(r) for r in roots], {}
    while todo:
        req = todo.pop()
        name = lock.canonical(req.name)
        if name in seen or name in lock.AMI_OWNS:
            continue
        if req.marker is not None and not req.marker.evaluate(markers):
            continue
        seen[name] = metadata.version(name)
        todo += [Requirement(r) for r in metadata.requires(name) or []]
    return seen


def _applies(marker: str | None) -> bool:
    return marker is None or Marker(marker).evaluate(DLAMI)


def test_the_boot_lock_is_the_closure_of_our_runtime_requirements():
    boot = {n: v for n, (v, m, _) in entries(lock.BOOT_LOCK).items() if _applies(m)}
    assert boot == closure([*lock.runtime_requirements(), "boto3"], DLAMI)


def test_the_metrics_lock_is_the_metrics_extras_closure_beyond_the_boot_lock():
    roots = [*lock.runtime_requirements(), "boto3", *lock.extra_requirements("metrics")]
    boot = entries(lock.BOOT_LOCK)
    want = {n: v for n, v in closure(roots, DLAMI).items() if n not in boot}
    metrics = {n: v for n, (v, m, _) in entries(lock.METRICS_LOCK).items() if _applies(m)}
    assert metrics == want


def test_the_image_lock_is_the_mxnet_engine_with_the_gpu_build():
    image = entries(lock.IMAGE_LOCK)
    assert image["mxnet-cu112"][0] == "1.9.1" and "mxnet" not in image
    assert image["numpy"][0].startswith("1.23.")  # mxnet 1.9.1 imports only with numpy < 1.24
    assert {"gluoncv", "boto3", "opencv-python-headless", "tensorboardx"} <= set(image)
    assert "opencv-python" not in image  # gluoncv's wrong dependency (requirements/overrides.txt)
