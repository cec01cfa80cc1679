"""The pipeline end to end: a cluster, sample events, the streaming job through spark-submit, a summary.

``clients/pipeline/run_pipeline.sh`` (and so ``make pipeline`` and the docker-compose ``spark`` service)
runs this after installing PySpark and the connector jars. Without ``--bootstrap-servers`` (or the
``BOOTSTRAP_SERVERS`` variable) it starts a local 3-broker cluster for the duration of the run.

With ``--command-config`` (or ``PIPELINE_COMMAND_CONFIG``), a Kafka client properties file, every client
of the run uses its security settings: the generator, topic creation and result reading (kafka-python)
and the Spark job (``kafka.``-prefixed options). ``--secure`` starts the local cluster secured as
``make run-secure`` does (SASL_SSL, SCRAM-SHA-512, ACLs) and uses the client.properties it writes.

    python -m clients.pipeline.run                                  # local cluster, 5000 events
    python -m clients.pipeline.run --secure                         # local SASL_SSL cluster
    BOOTSTRAP_SERVERS=kafka-0:9092 python -m clients.pipeline.run --trigger 30s --events 0
    python -m clients.pipeline.run --bootstrap-servers localhost:9092 \
        --command-config .cache/devcluster-secure/client.properties   # the cluster of `make run-secure`
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from clients.pipeline import client_security, generate_events, results, submit

STREAMING_JOB = submit.PIPELINE_DIR / "streaming_job.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", default=os.environ.get("BOOTSTRAP_SERVERS") or None,
                    help="an existing cluster (default: $BOOTSTRAP_SERVERS, else a local 3-broker cluster)")
    ap.add_argument("--input-topic", default=os.environ.get("PIPELINE_INPUT_TOPIC", "page-views"))
    ap.add_argument("--output-topic", default=os.environ.get("PIPELINE_OUTPUT_TOPIC", "page-views-per-minute"))
    ap.add_argument("--events", type=int, default=int(os.environ.get("PIPELINE_EVENTS", "5000")),
                    help="sample events to generate and produce first (0: none)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("PIPELINE_SEED", "1")))
    ap.add_argument("--trigger", default=os.environ.get("PIPELINE_TRIGGER", "available-now"),
                    help="'available-now' (process what is there, then stop) or an interval such as '30s'")
    ap.add_argument("--work-dir", default=os.environ.get("PIPELINE_WORK_DIR", str(submit.REPO / ".cache" / "pipeline")),
                    help="checkpoints, Parquet output and the Spark log go here")
    ap.add_argument("--replication-factor", type=int, default=0, help="for the topics it creates (default: min(3, brokers))")
    ap.add_argument("--command-config", metavar="FILE", default=os.environ.get("PIPELINE_COMMAND_CONFIG") or None,
                    help="Kafka client properties (security.protocol, sasl.*, ssl.*) for every client of the run")
    ap.add_argument("--secure", action="store_true",
                    help="without --bootstrap-servers: start the local cluster with SASL_SSL and ACLs (make run-secure)")
    args = ap.parse_args(argv)

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        command_config = args.command_config
        if not bootstrap:
            if args.secure:
                from clients.devcluster_secure import SecureDevCluster

                # A fresh cluster, CA and users in a directory of its own, removed at the end like LocalCluster's.
                state_dir = tempfile.mkdtemp(prefix="kafkette-secure-")
                stack.callback(shutil.rmtree, state_dir, True)
                secure = stack.enter_context(SecureDevCluster(3, base_port=0, state_dir=state_dir))
                bootstrap, command_config = secure.bootstrap, str(secure.files.client_properties)
                print(f"started a local 3-broker SASL_SSL cluster: {bootstrap} (client config: {command_config})")
            else:
                from clients.devcluster import LocalCluster

                cluster = stack.enter_context(LocalCluster(3))
                bootstrap = cluster.bootstrap
                print(f"started a local 3-broker cluster: {bootstrap}")
            # Its topics are new: checkpoints of an earlier run (offsets in other topics) do not apply.
            for stale in ("checkpoints", "parquet", "generated-until"):
                shutil.rmtree(work / stale, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    (work / stale).unlink()
        client_config = client_security.kafka_python_config(client_security.load(command_config))
        rf = args.replication_factor or min(3, len(bootstrap.split(",")))
        generate_events.create_topics(bootstrap, [args.input_topic], replication=rf, configs={"retention.ms": "-1"},
                                      client_config=client_config)
        generate_events.create_topics(bootstrap, [args.output_topic], replication=rf, client_config=client_config)
        if args.events:
            # An hour of event time, after whatever earlier runs into this work dir generated: a job that
            # resumes from its checkpoint would drop events older than its watermark as late.
            until_file = work / "generated-until"
            start_ms = (int(time.time() * 1000) // 60_000) * 60_000 - 3600_000
            with contextlib.suppress(OSError, ValueError):
                start_ms = max(start_ms, int(until_file.read_text()))
            events = generate_events.generate(args.events, seed=args.seed, start_ms=start_ms)
            generate_events.produce(events, bootstrap, args.input_topic, client_config=client_config)
            until_file.write_text(str(start_ms + 3600_000))
            print(f"produced {len(events)} page views to {args.input_topic} "
                  f"(event time {generate_events.iso_ms(start_ms)} + 1h, "
                  f"{sum(e.arrival_ms - e.event_time_ms >= 1000 for e in events)} late)")
        log = work / "spark-submit.log"
        job_args = ["--bootstrap-servers", bootstrap, "--topic", args.input_topic,
                    "--output-topic", args.output_topic, "--parquet-dir", str(work / "parquet"),
                    "--checkpoint-dir", str(work / "checkpoints"), "--trigger", args.trigger]
        if command_config:
            job_args += ["--command-config", str(Path(command_config).resolve())]
        print(f"spark-submit {STREAMING_JOB.name} (log: {log}) ...")
        t0 = time.monotonic()
        try:
            submit.run(STREAMING_JOB, job_args, log, timeout=float("inf") if args.trigger != "available-now" else 1800)
        except submit.SparkSubmitError as e:
            print(e, file=sys.stderr)
            return 1
        print(f"streaming job finished in {time.monotonic() - t0:.0f}s")
        out = results.read_topic(bootstrap, args.output_topic, client_config=client_config)
        keys = Counter(k for k, _ in out)
        views = sum(v["views"] for _, v in out)
        print(f"{args.output_topic}: {len(out)} window/page results ({len(keys)} distinct), {views} views counted")
        print("  (a window is written once the watermark, the latest event time minus 10 minutes, passes its end;\n"
              "   later windows stay in the job's state for the next run)")
        top = sorted(out, key=lambda kv: -kv[1]["views"])[:5]
        for k, v in top:
            print(f"  {k:<45} views={v['views']:<4} direct={v['direct_views']:<3} external={v['external_views']}")
        rows = results.read_parquet(work / "parquet")
        print(f"{work / 'parquet'}: {len(rows)} rows, {sum(r['views'] for r in rows)} views")
    return 0


if __name__ == "__main__":
    sys.exit(main())
