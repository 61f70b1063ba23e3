"""The SageMaker backend: a Plan becomes one training job (managed spot optional).

submit   pre-flight (offline checks, credentials, bucket region, image), the content-addressed
         dataset upload, then CreateTrainingJob through sagemaker-core; returns the job ARN
         (name and region in one reference, so `runs show` works from any shell).
status   DescribeTrainingJob -> ledger state, times, billable seconds, interruptions, the
         charge (seconds x instances at the recorded price; estimate.money makes it euros).
metrics  the trainer's metrics.jsonl from output.tar.gz once the job ended, else its
         "finetune-metrics" log lines; logs: the CloudWatch streams; stop: StopTrainingJob.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from finetune.aws import retries, sdk
from finetune.aws.errors import aws_errors
from finetune.aws.logs import JobLog, refresh
from finetune.aws.s3upload import upload_dataset
from finetune.aws.session import Aws, connect
from finetune.backends import base, modelfiles
from finetune.backends.base import Capabilities, Hooks, Status
from finetune.backends.sagemaker import cleanup as sm_cleanup
from finetune.backends.sagemaker import findjob, outputs, readiness, runrole, validate
from finetune.backends.sagemaker import options as sm_options
from finetune.backends.sagemaker import preflight as sm_preflight
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker import status as st
from finetune.backends.sagemaker import submit as sub
from finetune.catalog import instances
from finetune.contracts import metrics as mt
from finetune.errors import DataError, UsageError


class SageMakerBackend:
    name = "sagemaker"
    capabilities = Capabilities()  # spot (managed), several hosts, GPUs, StopTrainingJob
    Options = sm_options.SageMakerOptions
    price_book = "sagemaker"  # ml.* prices (catalog.prices), SageMaker billing (estimate.money)
    stream_logs = True  # `launch` prints the job's log while following it
    POLL_SECONDS = 20.0  # DescribeTrainingJob is rate limited, and jobs take minutes anyway

    def __init__(self, options=None, hooks: Hooks | None = None, poll_seconds=None):
        if isinstance(options, sm_options.SageMakerOptions):
            options = options.job_options()
        self.options = options or rq.JobOptions()
        hooks = hooks or Hooks()
        self.progress = hooks.progress  # start(label, total_bytes) -> advance(n), for uploads
        self.notify = hooks.notify
        self.poll_seconds = self.POLL_SECONDS if poll_seconds is None else poll_seconds
        self._sessions: dict[str, Aws] = {}
        self._jobs: dict[str, dict] = {}  # last description per job name
        self._logs: dict[str, JobLog] = {}
        self._log_read_at: dict[str, float] = {}
        self._found: dict[str, tuple[str, str]] = {}  # run id -> its job (_where)

    def readiness(self, aws, instance: str | None = None, spot: bool = False) -> list:
        """`finetune check`'s items of this backend (finetune.aws.readiness.Item)."""
        return readiness.items(aws, instance, spot)

    # -- launch ---------------------------------------------------------------------------
    @property
    def max_eur(self) -> float | None:
        return self.options.max_eur

    def resources(self, request: base.ResourceRequest):
        return sm_options.resources(request, self.options)

    def dataset_summary(self, uri: str):
        return sm_options.dataset_summary(uri, self.options)

    def preflight(self, plan, history=()) -> base.Preflight:
        return sm_preflight.dry_run(plan, self.options, history)

    def orphans(self, live_runs: set[str], older_than_s: float, scope=None) -> list[base.Orphan]:
        """Jobs of runs not live, roles of runs whose jobs ended; outside ``scope`` skipped
        (cleanup.py)."""
        known = scope.known_runs if scope is not None else frozenset()
        found = sm_cleanup.find(self._aws(None), live_runs, older_than_s, known=known)
        return sm_cleanup.scoped(found, scope)

    def remove(self, orphans: list[base.Orphan]) -> list[str]:
        return sm_cleanup.remove(self._aws(None), orphans)

    # -- submit ---------------------------------------------------------------------------
    def submit(self, plan, run, journal=None) -> str:
        """Check, upload, create the job; returns its ARN. Nothing is spent before the end."""
        # an engine the GPUs cannot run (MXNet on Hopper): refused before any AWS call
        instances.check_engine(plan.hyperparameters.engine, plan.resources.instance_type)
        opts = sub.options_for(self.options, run)
        validate.raise_if(sub.missing_settings(opts))
        aws = self._aws(opts.region)
        opts = sub.with_defaults(replace(opts, region=aws.region), plan, aws)
        opts = runrole.with_run_role(opts, aws, run.id)
        name = rq.job_name(run.id, sub.next_attempt(run.backend_ref))
        upload, channels, size = sub.dataset_location(plan, opts.bucket, opts.read_prefix)
        code = sub.source_dir(plan, opts, run.id)
        toolkit = code.hyperparameters(aws.region, plan.resources.hosts) if code else None
        entry = code.entrypoint(aws.region) if code else None  # checks the code, then runs it
        request = rq.training_request(plan, run.id, name, channels, opts, size, toolkit, entry)
        validate.raise_if(validate.check_request(request, aws.region))
        sub.check_stack_limits(aws, request)
        s3 = aws.client("s3")
        problems = validate.check_bucket_region(s3, opts.bucket, aws.region)
        image, missing = sub.pin_image(aws, opts.image)
        validate.raise_if(problems + missing)
        opts, request = sub.pinned(opts, request, image)
        if upload is not None:
            self._upload(s3, upload)
        expected = {c: sub.expected_files(plan, c) for c in channels}
        validate.raise_if(validate.check_inputs(s3, channels, expected))
        if code is not None:
            code.upload(s3)
        if opts.run_role:
            root = upload.uri if upload is not None else channels["train"][: -len("train/")]
            runrole.ensure_run_role(aws, opts, run.id, root)
        sub.record(run, opts, request)  # the name, before the job: a killed launch's is found
        self._found.pop(run.id, None)  # a resume's new job replaces the one looked up before
        if journal is not None:
            journal.event("creating", f"CreateTrainingJob {name} in {aws.region}")
        return sub.create(aws, request, new_role=opts.run_role)

    def _upload(self, s3, upload) -> None:
        advance = self.progress("Uploading", upload.total_bytes) if self.progress else None
        result = upload_dataset(s3, upload, advance)
        sent = result.bytes_sent / 2**20
        self.notify(
            f"Dataset at {upload.uri}: {len(result.uploaded)} file(s) uploaded ({sent:.1f} MiB), "
            f"{len(result.skipped)} already there."
        )

    # -- status, metrics, logs, stop ------------------------------------------------------
    def status(self, run) -> Status:
        if self._lookup(run) is None:
            name = findjob.recorded(run)[0][0]
            return Status("submitted", detail=f"its job {name} is not created (yet)")
        job = self._describe(run)
        status = st.to_status(job, run.id)
        facts = {**(status.facts or {}), "region": self._where(run)[1]}
        facts["backend_ref"] = job.get("TrainingJobArn") or run.backend_ref  # found by name
        if status.final:
            facts.update(st.charge_facts(job, facts["region"], run.spot))
            self._forget_run_role(run, facts["region"])
        return replace(status, facts=facts)

    def _forget_run_role(self, run, region: str) -> None:
        """The run's own role goes with its job (a resume creates it again)."""
        if sub.options_for(self.options, run).run_role:
            runrole.forget_run_role(self._aws(region), run.id)

    def metrics(self, run) -> list[mt.EpochMetrics]:
        if self._lookup(run) is None:
            return []  # its job is not created (yet)
        name, _ = self._where(run)
        job = self._jobs.get(name) or self._describe(run)
        ended = st.is_final(st.state_of(job))
        if ended:
            events = self._final_metrics(run, job)
            if events:
                return events
        return outputs.metrics_from_log(self._log(run, force=ended).text(0)[0])

    def logs(self, run, offset: int = 0) -> tuple[str, int]:
        if self._lookup(run) is None:
            return "", offset
        return self._log(run, force=False).text(offset)

    def stop(self, run) -> None:
        """StopTrainingJob: SageMaker sends SIGTERM, the trainer checkpoints within 120 s."""
        name, region = self._where(run)
        resource = self._resource(run)
        st.check_running(run, self._jobs[name])
        with aws_errors("StopTrainingJob", resource=name, region=region):
            try:
                retries.call(resource.stop)
            except Exception as exc:
                if retries.error_code(exc) != "ValidationException":
                    raise
                st.check_running(run, self._describe(run))  # it ended meanwhile: say so
                raise

    def fetch_model(self, run, dest: Path) -> Path:
        """The job's model.tar.gz (ModelArtifacts.S3ModelArtifacts), unpacked into ``dest``."""
        name, region = self._where(run)
        job = self._describe(run)
        uri = (job.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        if st.state_of(job) != "completed" or not uri:
            raise DataError(
                f"SageMaker job {name} is {job.get('TrainingJobStatus')}: it left no model",
                f"see `finetune runs show {run.id}`; only a completed run has a model.",
            )
        s3 = self._aws(region).client("s3")
        return modelfiles.into_place(dest, lambda tmp: outputs.download_model(s3, uri, tmp))

    def tensorboard_location(self, run) -> str | None:
        return sub.tensorboard_location(run)  # from the options its submission stored

    # -- helpers --------------------------------------------------------------------------
    def _aws(self, region: str | None) -> Aws:
        key = region or ""
        if key not in self._sessions:
            self._sessions[key] = connect(region)
        return self._sessions[key]

    def _lookup(self, run):
        """(job name, region) of the run's latest job: a newer one its launch recorded by name
        (killed before it heard back: findjob.py) that SageMaker knows, else the ledger's
        ARN; None while a recorded job is not created (yet), a UsageError without either."""
        if run.id not in self._found:
            names, region = findjob.newer(run)
            found = next((n for n in names if region and self._get(n, region, None)), None)
            ref = findjob.from_arn(run.backend_ref)
            if found is None and ref is None and not names:
                raise UsageError(
                    f"run {run.id} has no SageMaker job (its submission failed)",
                    f"see `finetune runs show {run.id}`; resume it with `finetune launch "
                    "--resume`.",
                )
            if found is None and ref is None:
                return None  # not cached: the launch may still be creating it
            self._found[run.id] = (found, region) if found else ref
        return self._found[run.id]

    def _where(self, run) -> tuple[str, str]:
        """(job name, region) of a job that exists (see _lookup)."""
        where = self._lookup(run)
        if where is None:
            raise UsageError(
                f"run {run.id} has no SageMaker job yet: {findjob.recorded(run)[0][0]} is "
                "not created",
                "if its launch was killed before CreateTrainingJob, nothing runs: `finetune "
                "cleanup` marks the run failed 15 minutes after the launch; `finetune launch "
                f"--resume {run.id}` starts it then.",
            )
        return where

    def _resource(self, run):
        """The job as a sagemaker-core TrainingJob (one DescribeTrainingJob)."""
        return self._get(*self._where(run))

    def _get(self, name: str, region: str, missing=UsageError):
        """DescribeTrainingJob of ``name``; ``missing`` None: None when there is no such job."""
        aws, cls = self._aws(region), sdk.training_job_class()
        with aws_errors("DescribeTrainingJob", resource=name, region=region):
            try:
                job = retries.call(
                    cls.get, training_job_name=name, session=aws.session, region=region
                )
            except Exception as exc:
                if missing is None and findjob.missing(exc):
                    return None
                raise
        self._jobs[name] = sdk.to_plain(job)
        return job

    def _describe(self, run) -> dict:
        """The job's description with the API's field names."""
        self._resource(run)
        return self._jobs[self._where(run)[0]]

    def _log(self, run, force: bool) -> JobLog:
        """The job's log, refreshed unless it was read moments ago (metrics and logs share it)."""
        name, region = self._where(run)
        log = self._logs.setdefault(name, JobLog(name, hosts=run.hosts or 1))
        now = time.monotonic()
        if force or now - self._log_read_at.get(name, -1e9) >= min(2.0, self.poll_seconds / 2):
            refresh(self._aws(region).client("logs"), log)
            self._log_read_at[name] = now
        return log

    def _final_metrics(self, run, job: dict) -> list[mt.EpochMetrics]:
        """metrics.jsonl from the job's output.tar.gz, kept in the run dir once fetched."""
        local = (
            Path(run.run_dir or ".") / sub.RECORD_DIR / f"{job['TrainingJobName']}-metrics.jsonl"
        )
        if not local.is_file() and run.run_dir:
            _, region = self._where(run)
            text = outputs.read_output_metrics(self._aws(region).client("s3"), job)
            if text is None:
                return []
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text)
        return mt.read(local)
