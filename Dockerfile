# syntax=docker/dockerfile:1
# The training image: CUDA 11.2 + cuDNN 8 (what mxnet-cu112 1.9.1 was built against),
# Python 3.11, MXNet + GluonCV and this package. Its entrypoint is the trainer, which reads
# SageMaker's /opt/ml tree, so one image serves SageMaker (bring-your-own: SageMaker runs
# `docker run IMAGE train`) and EC2 or local runs that recreate the tree:
#   docker build -t finetune-train .
#   docker run --gpus all --shm-size 1g -v /data/ml:/opt/ml finetune-train
# It runs as root by default because SageMaker mounts /opt/ml owned by root; elsewhere,
# `--user finetune` runs it unprivileged on a tree that user may write.
FROM nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04

# libmxnet.so takes libgomp and libquadmath from the system (it bundles the rest)
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libgomp1 libquadmath0 \
 && rm -rf /var/lib/apt/lists/*

# Ubuntu 20.04 ships Python 3.8; uv installs a standalone CPython 3.11 (what the package needs)
COPY --from=ghcr.io/astral-sh/uv:0.5.11 /uv /usr/local/bin/uv
ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_COMPILE_BYTECODE=1 \
    UV_NO_CACHE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MXNET_HOME=/opt/mxnet

# The engine: mxnet-cu112 instead of the CPU `mxnet` of the [train] extra; numpy<1.24 held by
# the constraints file; GluonCV without its declared deps (its opencv-python would lift numpy
# to 2 and break MXNet) but with what it really uses.
COPY requirements/constraints.txt /tmp/constraints.txt
RUN uv venv --python 3.11 /opt/venv \
 && uv pip install -c /tmp/constraints.txt \
      mxnet-cu112==1.9.1 "numpy<1.24" "opencv-python-headless<4.9" "scipy<1.12" \
      "matplotlib<3.9" "pandas<2.2" tqdm requests portalocker yacs autocfg \
 && uv pip install --no-deps gluoncv==0.10.5.post0

# This package last, so a code change rebuilds only these layers. (MXNet itself cannot be
# imported here: libcuda.so.1 comes from the host's driver at run time.)
WORKDIR /opt/finetune
COPY pyproject.toml README.md ./
COPY finetune ./finetune
# boto3: the EC2 agent (python -m finetune.backends.ec2.agent) syncs data, checkpoints and status with S3.
# [metrics]: the optional TensorBoard/MLflow loggers a recipe may name (metric_logging), at the
# constraints' versions -- the same set the test environment runs beside numpy<1.24.
RUN uv pip install -c /tmp/constraints.txt ".[metrics]" "boto3>=1.34,<2" \
 && python -c "import finetune.train" \
 && useradd --create-home --uid 1000 finetune \
 && mkdir -p /opt/mxnet/models \
 && chown finetune /opt/mxnet /opt/mxnet/models

ENTRYPOINT ["python", "-m", "finetune.train"]
