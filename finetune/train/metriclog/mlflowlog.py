"""MLflow through mlflow-skinny's tracking client: one MLflow run per finetune run.

The default store is SQLite in the run's output folder (``mlflow ui --backend-store-uri
sqlite:///RUN/mlflow.db``); ``metric_logging.mlflow_tracking_uri`` sends it anywhere MLflow
can (a shared SQLite file, an http(s) tracking server). A run resumed after a stop continues
the same MLflow run: its id is kept in the checkpoint folder, which travels with the
checkpoints (S3 on SageMaker and EC2)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from finetune.files import write_atomic

RUN_ID_FILE = "mlflow-run.json"  # in the checkpoint folder
MAX_PARAM = 6000  # MLflow's longest param value


class MlflowLogger:
    """Params, tags and metrics of one run, batched per call."""

    name = "mlflow"

    def __init__(self, uri: str, experiment: str, run_name: str, checkpoint_dir: Path):
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.resumed = False
        resumed = self._resume(checkpoint_dir, uri)
        self.run_id: str
        if resumed is not None:
            self.run_id = resumed
        else:
            found = self.client.get_experiment_by_name(experiment)
            exp_id = found.experiment_id if found else self.client.create_experiment(experiment)
            self.run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
            doc = {"run_id": self.run_id, "tracking_uri": uri}
            write_atomic(checkpoint_dir / RUN_ID_FILE, json.dumps(doc) + "\n")

    def _resume(self, checkpoint_dir: Path, uri: str) -> str | None:
        try:
            doc = json.loads((checkpoint_dir / RUN_ID_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if doc.get("tracking_uri") != uri:
            return None
        try:  # the store may be gone (a fresh SageMaker output folder after a spot restart)
            self.client.get_run(doc["run_id"])
        except Exception:  # any failure: start a new run
            return None
        self.client.update_run(doc["run_id"], status="RUNNING")
        self.resumed = True
        return doc["run_id"]

    def params(self, params: Mapping[str, str], tags: Mapping[str, str]) -> None:
        from mlflow.entities import Param, RunTag

        tag_list = [RunTag(k, str(v)[:MAX_PARAM]) for k, v in tags.items() if v is not None]
        # params are write-once in MLflow: a resumed run has them already
        ps = [] if self.resumed else [Param(k, str(v)[:MAX_PARAM]) for k, v in params.items()]
        self.client.log_batch(self.run_id, params=ps, tags=tag_list)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in values.items()]
        self.client.log_batch(self.run_id, metrics=batch)

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)
