# The training image: CUDA 11.8 + cuDNN 8 (mxnet-cu112 1.9.1 was built against 11.2; 11.8 keeps
# its sonames),
# Python 3.11, MXNet + GluonCV and this package, every Python package from a hashed lock.
#   docker build -t finetune-train .
# Its entrypoint is the trainer, which reads SageMaker's /opt/ml tree, so one image serves
# SageMaker (bring-your-own: SageMaker runs `docker run IMAGE train`, as root: it mounts /opt/ml
# owned by root) and EC2, whose user data gives the tree to uid 1000 and runs
#   docker run --user 1000:1000 --entrypoint python ... IMAGE -m finetune.backends.ec2.agent
# tests/containers/ builds this file on a local Debian base (BASE) with the CPU mxnet in place
# of mxnet-cu112 (LOCK, PIP_ARGS) and runs it under podman; docs/security.md says what is locked.

# The base: libmxnet.so (mxnet-cu112 1.9.1) links CUDA 11's runtime libraries, cuDNN 8 and
# NCCL 2 from the system; docs/decisions/101-mxnet-base-image.md says why this one is kept.
# Tag: nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04, pinned by BASE_DIGEST; `finetune image
# push` builds only with a digest (--base-digest, else this default).
ARG BASE=nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04
ARG BASE_DIGEST=@sha256:85fb7ac694079fff1061a0140fd5b5a641997880e12112d92589c3bbb1e8b7ca
FROM ${BASE}${BASE_DIGEST}
# LOCK: the hashed list of the image's Python packages (a CPU variant for tests);
# PIP_ARGS: where pip and uv find them (default: the package index; tests: --no-index
# --find-links to a folder of the lock's wheels).
ARG LOCK=/tmp/image.lock
ARG PIP_ARGS=

# libmxnet.so takes libgomp and libquadmath from the system (it bundles OpenBLAS and
# libgfortran; CUDA, cuDNN and NCCL come from the base); the base's python3 + pip only
# install uv. (apt checks the archive's signatures; a base that has them all, like the
# tests' Debian one, skips this step and needs no mirror.)
RUN pkgs="ca-certificates libgomp1 libquadmath0 python3-pip" \
 && if ! dpkg-query -W $pkgs >/dev/null 2>&1; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# uv at the dev lock's pin (the wheel by its hashes); it makes the venv with CPython 3.11
# (Ubuntu 22.04 has 3.10: uv downloads its managed build and checks the sha256 it carries for
# it; a base with python3.11, like Debian 12, is used as it is) and installs the image lock.
COPY requirements/image.lock requirements/dev.lock /tmp/
ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_COMPILE_BYTECODE=1 \
    UV_NO_CACHE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MXNET_HOME=/opt/mxnet
# the entries NAME==... of the dev lock, their hashes included, as scripts/lock.sh reads them
RUN entry() { awk -v n="$1==" 'index($0, n) == 1 {p = 1} p {print} p && !/\\$/ {exit}' \
      /tmp/dev.lock; } \
 && entry uv > /tmp/uv.txt \
 && { entry setuptools; entry wheel; } > /tmp/build.txt \
 && python3 -m pip install --no-cache-dir --disable-pip-version-check --target /opt/uv \
      --require-hashes --no-deps $PIP_ARGS -r /tmp/uv.txt \
 && /opt/uv/bin/uv venv --python 3.11 /opt/venv \
 && /opt/uv/bin/uv pip install --require-hashes --no-deps $PIP_ARGS \
      -r "$LOCK" -r /tmp/build.txt

# This package last, so a code change rebuilds only these layers: no dependency of its own
# (all are in the lock), built with the lock's setuptools, which then leaves the image.
# (MXNet itself cannot be imported here: libcuda.so.1 comes from the host's driver at run time.)
WORKDIR /opt/finetune
COPY pyproject.toml README.md ./
COPY finetune ./finetune
RUN /opt/uv/bin/uv pip install --no-deps --no-build-isolation . \
 && /opt/uv/bin/uv pip uninstall setuptools wheel \
 && rm -rf build finetune.egg-info /tmp/*.txt /tmp/*.lock \
 && python -c "import finetune.train, finetune.backends.ec2.agent" \
 && useradd --create-home --uid 1000 --user-group finetune \
 && mkdir -p /opt/mxnet/models \
 && chown -R finetune:finetune /opt/mxnet

# No USER: SageMaker needs root (above); EC2's user data passes --user 1000:1000.
ENTRYPOINT ["python", "-m", "finetune.train"]
