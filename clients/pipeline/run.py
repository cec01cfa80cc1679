"""The pipeline end to end: a cluster, sample events, the streaming job through spark-submit, a summary.

``clients/pipeline/run_pipeline.sh`` (and so ``make pipeline`` and the docker-compose ``spark`` service)
runs this after installing PySpark and the connector jars. Without ``--bootstrap-servers`` (or the
``BOOTSTRAP_SERVERS`` variable) it starts a local 3-broker cluster for the duration of the run.

State (Spark's checkpoints, the Parquet output, the "generated-until" mark, Spark's log) lives in a
directory of its own per cluster and topics under ``--work-dir`` (``state.py``): a run never resumes
checkpoints that belong to another cluster. A local cluster started for the run is new every time, and
so is its state; its checkpoints are deleted when it stops.

A run that finds no input the job has not processed yet says so and exits with status 3 (``EXIT_NO_INPUT``)
without starting Spark, unless ``--allow-empty`` (or ``PIPELINE_ALLOW_EMPTY=1``) says that is fine.

With ``--command-config`` (or ``PIPELINE_COMMAND_CONFIG``), a Kafka client properties file, every client
of the run uses its security settings: the generator, topic creation and result reading (kafka-python)
and the Spark job (``kafka.``-prefixed options). ``--secure`` starts the local cluster secured as
``make run-secure`` does (SASL_SSL, SCRAM-SHA-512, ACLs) and uses the client.properties it writes.

    python -m clients.pipeline.run                                  # local cluster, 5000 events
    python -m clients.pipeline.run --secure                         # local SASL_SSL cluster
    BOOTSTRAP_SERVERS=kafka-0:9092 python -m clients.pipeline.run --trigger 30s --events 0
    python -m clients.pipeline.run --bootstrap-servers localhost:9092 \\
        --command-config .cache/devcluster-secure/client.properties   # the cluster of `make run-secure`
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.pipeline import (
    client_security,
    cluster_info,
    generate_events,
    results,
    state,
    submit,
    topic_collision,
)
from clients.pipeline.progress import stage

STREAMING_JOB = submit.PIPELINE_DIR / "streaming_job.py"
EXIT_NO_INPUT = 3
HOUR_MS = 3600_000
WATERMARK = "10 minutes"  # streaming_job.py's default --watermark, named in the summary


def shown(path: Path) -> str:
    """A path as the user would type it: relative to the current directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", default=os.environ.get("BOOTSTRAP_SERVERS") or None,
                    help="an existing cluster (default: $BOOTSTRAP_SERVERS, else a local 3-broker cluster)")
    ap.add_argument("--input-topic", default=os.environ.get("PIPELINE_INPUT_TOPIC", "page-views"),
                    help="the topic the events go to and the job reads (default: page-views)")
    ap.add_argument("--output-topic", default=os.environ.get("PIPELINE_OUTPUT_TOPIC", "page-views-per-minute"),
                    help="the topic the job writes its windows to (default: page-views-per-minute)")
    ap.add_argument("--events", type=int, default=int(os.environ.get("PIPELINE_EVENTS", "5000")),
                    help="sample events to generate and produce first (0: none)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("PIPELINE_SEED", "1")),
                    help="seed of the event generator (the same seed and time span give the same events)")
    ap.add_argument("--trigger", default=os.environ.get("PIPELINE_TRIGGER", "available-now"),
                    help="'available-now' (process what is there, then stop) or an interval such as '30s'")
    ap.add_argument("--work-dir", default=os.environ.get("PIPELINE_WORK_DIR", str(submit.REPO / ".cache" / "pipeline")),
                    help="where the state directories go, one per cluster and topics (checkpoints, Parquet "
                         "output, Spark's log); default .cache/pipeline")
    ap.add_argument("--allow-empty", action="store_true", default=env_flag("PIPELINE_ALLOW_EMPTY"),
                    help=f"exit 0 when there is no new input (default: say so and exit {EXIT_NO_INPUT})")
    ap.add_argument("--replication-factor", type=int, default=0, help="for the topics it creates (default: min(3, brokers))")
    ap.add_argument("--command-config", metavar="FILE", default=os.environ.get("PIPELINE_COMMAND_CONFIG") or None,
                    help="Kafka client properties (security.protocol, sasl.*, ssl.*) for every client of the run")
    ap.add_argument("--secure", action="store_true",
                    help="without --bootstrap-servers: start the local cluster with SASL_SSL and ACLs (make run-secure)")
    args = ap.parse_args(argv)
    try:
        topic_collision.check([args.output_topic], topics=[args.input_topic])
    except topic_collision.TopicCollisionError as e:
        ap.error(str(e))
    return args


@dataclass
class Cluster:
    bootstrap: str
    command_config: str | None
    local: bool


def start_or_connect(args: argparse.Namespace, stack: contextlib.ExitStack) -> Cluster:
    if args.bootstrap_servers:
        stage(f"using the cluster at {args.bootstrap_servers}")
        return Cluster(args.bootstrap_servers, args.command_config, local=False)
    if args.secure:
        from clients.devcluster_secure import SecureDevCluster

        stage("starting a local 3-broker SASL_SSL cluster")
        # A fresh cluster, CA and users in a directory of its own, removed at the end like LocalCluster's.
        state_dir = tempfile.mkdtemp(prefix="kafkette-secure-")
        stack.callback(shutil.rmtree, state_dir, True)
        secure = stack.enter_context(SecureDevCluster(3, base_port=0, state_dir=state_dir))
        stack.callback(stage, "stopping the local cluster")
        print(f"started a local 3-broker SASL_SSL cluster: {secure.bootstrap} "
              f"(client config: {secure.files.client_properties})")
        return Cluster(secure.bootstrap, str(secure.files.client_properties), local=True)
    from clients.devcluster import LocalCluster

    stage("starting a local 3-broker cluster")
    cluster = stack.enter_context(LocalCluster(3))
    stack.callback(stage, "stopping the local cluster")
    print(f"started a local 3-broker cluster: {cluster.bootstrap}")
    return Cluster(cluster.bootstrap, args.command_config, local=True)


def generate(args: argparse.Namespace, st: state.PipelineState, bootstrap: str,
             client_config: dict[str, Any]) -> list[generate_events.PageView]:
    """Produce ``args.events`` page views with event times from where earlier runs into this state stopped
    (at most an hour back) up to now: never in the future, and never before the job's watermark."""
    now_ms = int(time.time() * 1000)
    start_ms = (now_ms // 60_000) * 60_000 - HOUR_MS
    until = st.generated_until()
    if until is not None:
        if until > now_ms:
            raise RuntimeError(f"{st.generated_until_file} says events up to {generate_events.iso_ms(until)} were "
                               f"generated, which is after the current time {generate_events.iso_ms(now_ms)}: "
                               "was the clock set back?")
        # Older events would be behind the watermark the checkpoint holds, and dropped as late.
        start_ms = max(start_ms, until)
    if now_ms - start_ms < 1000:
        print(f"no event time left to generate: earlier runs generated up to {generate_events.iso_ms(start_ms)}, "
              "which is now")
        return []
    stage(f"generating {args.events} page views into {args.input_topic}")
    events = generate_events.generate(args.events, seed=args.seed, start_ms=start_ms, span_s=(now_ms - start_ms) / 1000,
                                      now_ms=now_ms, id_prefix=f"e{args.seed}-{start_ms // 1000}")
    generate_events.produce(events, bootstrap, args.input_topic, client_config=client_config)
    st.set_generated_until(now_ms)
    print(f"produced {len(events)} page views to {args.input_topic} "
          f"(event time {generate_events.iso_ms(start_ms)} to {generate_events.iso_ms(now_ms)}, "
          f"{sum(e.arrival_ms - e.event_time_ms >= 1000 for e in events)} late)")
    return events


def unprocessed(st: state.PipelineState, begin: dict[tuple[str, int], int], end: dict[tuple[str, int], int]) -> int | None:
    """Input records one of the job's queries has not processed yet; None if a checkpoint cannot be read."""
    try:
        return max(state.unprocessed_records(begin, end, state.processed_offsets(q)) for q in st.query_checkpoints())
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot read the checkpoints in {shown(st.checkpoints)} ({e}); Spark decides what is new")
        return None


def no_new_input(args: argparse.Namespace, st: state.PipelineState) -> int:
    if st.new:
        print(f"no new input: {args.input_topic} is empty, so the job would process nothing and write nothing")
    else:
        print(f"no new input: the job has processed every record in {args.input_topic} already (checkpoints in "
              f"{shown(st.checkpoints)}), so it would process nothing and write nothing")
    if args.allow_empty:
        print("(--allow-empty: that is fine)")
        return 0
    print(f"exiting with status {EXIT_NO_INPUT}: produce events first (--events N), or pass --allow-empty "
          "(PIPELINE_ALLOW_EMPTY=1) when an empty run is expected")
    return EXIT_NO_INPUT


def read_report(st: state.PipelineState) -> dict[str, Any]:
    try:
        report = json.loads(st.report.read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def summarize(args: argparse.Namespace, cluster: Cluster, st: state.PipelineState, client_config: dict[str, Any],
              out_start: dict[int, int], parquet_before: set[Path], input_total: int,
              report: dict[str, Any]) -> None:
    """What this run wrote, what the outputs hold in all, and what is still waiting in the job's state."""
    this_run = results.read_topic(cluster.bootstrap, args.output_topic, client_config=client_config,
                                  start_offsets=out_start)
    keys = Counter(k for k, _ in this_run)
    views = sum(v["views"] for _, v in this_run)
    print(f"{args.output_topic}: {len(this_run)} window/page results ({len(keys)} distinct), {views} views counted")
    everything = (this_run if not any(out_start.values())
                  else results.read_topic(cluster.bootstrap, args.output_topic, client_config=client_config))
    total_views = sum(v["views"] for _, v in everything)
    if len(everything) != len(this_run):
        print(f"  (written by this run; the topic holds {len(everything)} results, {total_views} views, in all)")
    for k, v in sorted(this_run, key=lambda kv: -kv[1]["views"])[:5]:
        print(f"  {k:<45} views={v['views']:<4} direct={v['direct_views']:<3} external={v['external_views']}")

    committed = results.committed_parquet_files(st.parquet)
    new_files = [f for f in committed if f not in parquet_before]
    rows_new = [r for f in new_files for r in results.read_parquet_file(f)]
    rows_all = rows_new if len(new_files) == len(committed) else results.read_parquet(st.parquet)
    line = f"{shown(st.parquet)}: {len(rows_new)} rows, {sum(r['views'] for r in rows_new)} views written by this run"
    if len(rows_all) != len(rows_new):
        line += f" ({len(rows_all)} rows, {sum(r['views'] for r in rows_all)} views in all)"
    print(line)

    watermark = (report.get("queries", {}).get("page_views_to_kafka") or {}).get("watermark")
    waiting = input_total - total_views
    print(f"A window is written once the watermark (the latest event time seen minus {WATERMARK}) passes its end"
          + (f"; the watermark is now {watermark}" if watermark else "")
          + f", so the windows of the last {WATERMARK} of event time are not written yet"
          + (f" ({waiting} views)." if waiting > 0 else "."))
    if cluster.local:
        print(f"This run's cluster stops now and its checkpoints ({shown(st.checkpoints)}) are deleted with it, so those "
              "windows are never written. Against a cluster that outlives the run (BOOTSTRAP_SERVERS=host:port "
              "make pipeline) they stay in the job's state, and the next run writes them once its newer events "
              "move the watermark past them.")
    else:
        print(f"They stay in the job's state ({shown(st.checkpoints)}): the next run against this cluster and these topics "
              "writes them once its newer events move the watermark past them.")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(args.work_dir)
    with contextlib.ExitStack() as stack:
        cluster = start_or_connect(args, stack)
        client_config = client_security.kafka_python_config(client_security.load(cluster.command_config))
        try:
            cid = cluster_info.cluster_id(cluster.bootstrap, client_config)
        except Exception as e:  # kafka-python's NoBrokersAvailable, KafkaTimeoutError, authentication errors
            print(f"cannot reach the cluster at {cluster.bootstrap}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        st = state.open_state(root, bootstrap=cluster.bootstrap, cluster_id=cid, input_topics=[args.input_topic],
                              output_topic=args.output_topic, local_cluster=cluster.local)
        try:
            stack.enter_context(state.locked(st))
        except state.StateInUse as e:
            print(e, file=sys.stderr)
            return 1
        if cluster.local:
            # Its offsets mean nothing once the cluster is gone: keep the Parquet output and the log only.
            stack.callback(st.drop_checkpoints)
            for gone in state.prune_stopped_local_clusters(root, keep=st.path):
                print(f"removed {shown(gone)}: the state of an earlier run's local cluster, stopped since")
        print(f"cluster id {cid}; state in {shown(st.path)} ({'new' if st.new else 'resumed from earlier runs'})")
        for other in state.others_for_cluster(root, st):
            print(f"note: {shown(other)} holds state for the same cluster id and topics, reached through "
                  f"{','.join((state.read_manifest(other) or {}).get('bootstrap_servers', []))}; this run does not "
                  "use it (state is keyed by the bootstrap servers too)")

        rf = args.replication_factor or min(3, len(cluster.bootstrap.split(",")))
        generate_events.create_topics(cluster.bootstrap, [args.input_topic], replication=rf,
                                      configs={"retention.ms": "-1"}, client_config=client_config)
        generate_events.create_topics(cluster.bootstrap, [args.output_topic], replication=rf, client_config=client_config)
        if args.events:
            try:
                generate(args, st, cluster.bootstrap, client_config)
            except RuntimeError as e:
                print(e, file=sys.stderr)
                return 1

        begin, end = cluster_info.offset_range(cluster.bootstrap, [args.input_topic], client_config)
        if args.trigger == "available-now":
            try:
                pending = unprocessed(st, begin, end)
            except state.CheckpointAhead as e:
                print(f"cannot resume {shown(st.checkpoints)}: {e}", file=sys.stderr)
                return 1
            if pending == 0:
                return no_new_input(args, st)
            if pending is not None:
                print(f"{pending} input records the job has not processed yet")

        _, out_end = cluster_info.offset_range(cluster.bootstrap, [args.output_topic], client_config)
        out_start = {p: o for (_, p), o in out_end.items()}
        parquet_before = set(results.committed_parquet_files(st.parquet))
        with contextlib.suppress(FileNotFoundError):
            st.report.unlink()
        job_args = ["--bootstrap-servers", cluster.bootstrap, "--topic", args.input_topic,
                    "--output-topic", args.output_topic, "--parquet-dir", str(st.parquet),
                    "--checkpoint-dir", str(st.checkpoints), "--trigger", args.trigger, "--report", str(st.report)]
        if cluster.command_config:
            job_args += ["--command-config", str(Path(cluster.command_config).resolve())]
        stage(f"spark-submit {STREAMING_JOB.name} (log: {shown(st.log)})")
        t0 = time.monotonic()
        try:
            submit.run(STREAMING_JOB, job_args, st.log, timeout=float("inf") if args.trigger != "available-now" else 1800)
        except submit.SparkSubmitError as e:
            print(e, file=sys.stderr)
            return 1
        report = read_report(st)
        rows_in = (report.get("queries", {}).get("page_views_to_kafka") or {}).get("input_rows")
        print(f"streaming job finished in {time.monotonic() - t0:.0f}s"
              + (f": {rows_in} input records read" if rows_in is not None else ""))
        stage("summary")
        summarize(args, cluster, st, client_config, out_start, parquet_before,
                  sum(end.values()) - sum(begin.values()), report)
        if rows_in == 0:
            return no_new_input(args, st)
    return 0


if __name__ == "__main__":
    sys.exit(main())
