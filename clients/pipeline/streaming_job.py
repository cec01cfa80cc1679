"""Structured Streaming job: page views per minute and page, from Kafka to Kafka and Parquet.

Reads the JSON events of ``generate_events.py`` from a topic (``--topic``, Kafka's ``subscribe``) or from
every topic matching a regex (``--topic-pattern``, ``subscribePattern``), parses them with a declared
schema, registers them as the temp view ``page_views`` (watermarked on ``event_time``) and aggregates
with SQL: tumbling windows on event time (``--window``, 1 minute) per page. Each window is emitted once,
when the watermark (``--watermark``, max event time seen minus 10 minutes) passes its end (append
mode), to two sinks, each its own streaming query with its own checkpoint under ``--checkpoint-dir``:

* the Kafka sink, into ``--output-topic``: key ``<window start>|<page>``, value a JSON object;
* Parquet files under ``--parquet-dir`` (Spark's file sink: exactly once through its ``_spark_metadata``).

``--command-config FILE``: a Kafka client properties file (``make run-secure`` writes one) whose
security settings go to the source and the sink as ``kafka.``-prefixed options (``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.type``, ...).

``--trigger available-now`` (the default) processes everything in the topics, then stops; a later run
with the same checkpoint directory resumes where the previous one stopped. ``--trigger 30s`` runs
continuously with a micro-batch every 30 seconds. The checkpoints hold the offsets of one cluster's
topics: give each cluster its own ``--checkpoint-dir`` (``run.py`` keys them by cluster, see ``state.py``).

The job refuses (exit status 2, before Spark starts) an input that covers the output topic: ``--topic``
naming it, or a ``--topic-pattern`` matching it (``topic_collision.py``). ``--report FILE`` writes a JSON
account of the run when it ends: per query, the batches run, the input rows read and the watermark.

    python -m clients.pipeline.submit clients/pipeline/streaming_job.py \
        --bootstrap-servers localhost:9092 --topic page-views --output-topic page-views-per-minute \
        --parquet-dir out/parquet --checkpoint-dir out/checkpoints
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from clients.pipeline import client_security, topic_collision

# The value of each Kafka record. Fields not listed here are ignored; missing ones are null.
EVENT_SCHEMA = StructType([
    StructField("event_id", StringType(), False),
    StructField("event_time", TimestampType(), False),
    StructField("user_id", StringType(), False),
    StructField("session_id", StringType(), True),
    StructField("page", StringType(), False),
    StructField("referrer", StringType(), True),
    StructField("user_agent", StringType(), True),
    StructField("country", StringType(), True),
    StructField("duration_ms", IntegerType(), True),
])

# The aggregation, over the temp view registered by parse_events(). `direct_views` have no referrer,
# `external_views` come from another site; the rest followed a link inside the shop.
WINDOWED_COUNTS_SQL = """
SELECT window.start                                              AS window_start,
       window.end                                                AS window_end,
       page,
       count(*)                                                  AS views,
       count_if(referrer IS NULL)                                AS direct_views,
       count_if(referrer IS NOT NULL
                AND NOT startswith(referrer, 'https://shop.example.com')) AS external_views,
       sum(duration_ms)                                          AS total_duration_ms
FROM page_views
GROUP BY window(event_time, '{window}'), page
"""


def build_session(app_name: str) -> SparkSession:
    return (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        # Adaptive execution does not apply to stateful streaming; off, so Spark does not warn about it.
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )


def kafka_source_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {
        "kafka.bootstrap.servers": args.bootstrap_servers,
        "startingOffsets": args.starting_offsets,
        "failOnDataLoss": "true" if args.fail_on_data_loss else "false",
        "kafka.client.id": "kafkette-pipeline-source",
        # Pattern subscriptions see new matching topics within this period.
        "kafka.metadata.max.age.ms": "5000",
        **client_security.spark_options(client_security.load(args.command_config)),
    }
    if args.topic:
        opts["subscribe"] = ",".join(args.topic)
    else:
        opts["subscribePattern"] = args.topic_pattern
    if args.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    return opts


def parse_events(raw: DataFrame, watermark: str) -> DataFrame:
    """Kafka records -> typed page views with a watermark; registered as the temp view ``page_views``."""
    parsed = (
        raw.select(
            F.from_json(F.col("value").cast("string"), EVENT_SCHEMA,
                        {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss[.SSS]XXX", "mode": "PERMISSIVE"}).alias("e"),
            F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp").alias("arrival_time"),
        )
        .select("e.*", "topic", "partition", "offset", "arrival_time")
        # Records that are not page views (unparsable values) are dropped here, before the watermark.
        .where(F.col("event_time").isNotNull() & F.col("page").isNotNull())
        .withWatermark("event_time", watermark)
    )
    parsed.createOrReplaceTempView("page_views")
    return parsed


def windowed_counts(spark: SparkSession, window: str) -> DataFrame:
    return spark.sql(WINDOWED_COUNTS_SQL.format(window=window))


def to_kafka_records(counts: DataFrame) -> DataFrame:
    """key ``<window start ISO>|<page>`` (one key per window and page), value JSON."""
    start = F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return counts.select(
        F.concat_ws("|", start, F.col("page")).alias("key"),
        F.to_json(F.struct(
            start.alias("window_start"),
            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "page", "views", "direct_views", "external_views", "total_duration_ms",
        )).alias("value"),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Page views per window and page: Kafka -> Kafka + Parquet.")
    ap.add_argument("--bootstrap-servers", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--topic", action="append", help="input topic (repeatable): subscribe")
    src.add_argument("--topic-pattern", help="regex of input topics: subscribePattern")
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--parquet-dir", required=True)
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--watermark", default="10 minutes")
    ap.add_argument("--trigger", default="available-now", help="'available-now' or an interval like '30s'")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=0)
    ap.add_argument("--fail-on-data-loss", default="true", choices=["true", "false"])
    ap.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties (security.protocol, sasl.*, ssl.*) for the source and the sink")
    ap.add_argument("--report", metavar="FILE",
                    help="write a JSON account of the run here at the end (batches, input rows, watermark per query)")
    args = ap.parse_args(argv)
    args.fail_on_data_loss = args.fail_on_data_loss == "true"
    try:
        topic_collision.check([args.output_topic], topics=args.topic or (), pattern=args.topic_pattern)
    except topic_collision.TopicCollisionError as e:
        ap.error(str(e))

    spark = build_session("kafkette-page-views")
    raw = spark.readStream.format("kafka").options(**kafka_source_options(args)).load()
    parse_events(raw, args.watermark)
    counts = windowed_counts(spark, args.window)

    def trigger(writer):  # type: ignore[no-untyped-def]
        if args.trigger == "available-now":
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=args.trigger)

    to_kafka = trigger(
        to_kafka_records(counts).writeStream.format("kafka")
        .outputMode("append")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("kafka.client.id", "kafkette-pipeline-sink")
        .options(**client_security.spark_options(client_security.load(args.command_config)))
        .option("topic", args.output_topic)
        .option("checkpointLocation", f"{args.checkpoint_dir}/kafka")
        .queryName("page_views_to_kafka")
    ).start()
    to_parquet = trigger(
        counts.writeStream.format("parquet")
        .outputMode("append")
        .option("path", args.parquet_dir)
        .option("checkpointLocation", f"{args.checkpoint_dir}/parquet")
        .queryName("page_views_to_parquet")
    ).start()

    # Wait for both; if either fails, stop the other and exit non-zero.
    queries = (to_kafka, to_parquet)
    failed = False
    while any(q.isActive for q in queries):
        try:
            spark.streams.awaitAnyTermination()
        except Exception as e:
            print(f"streaming query failed: {e}", file=sys.stderr)
            failed = True
            for q in queries:
                if q.isActive:
                    q.stop()
        spark.streams.resetTerminated()
    failed = failed or any(q.exception() is not None for q in queries)
    reports = {q.name: query_report(q) for q in queries}
    for name, r in reports.items():
        print(f"query {name}: {r['batches']} batches, {r['input_rows']} input rows, last batch {r['last_batch']}, "
              f"watermark {r['watermark']}", file=sys.stderr)
    if args.report:
        Path(args.report).write_text(json.dumps({"failed": failed, "queries": reports}, indent=2) + "\n")
    spark.stop()
    return 1 if failed else 0


def query_report(q: Any) -> dict[str, Any]:
    """What one query did in this run, from its progress reports (Spark keeps the last 100 of them)."""
    progress = [p for p in q.recentProgress if p]
    last = q.lastProgress or {}
    return {
        "batches": len({p["batchId"] for p in progress}),
        "input_rows": sum(int(p.get("numInputRows", 0)) for p in progress),
        "last_batch": last.get("batchId"),
        "watermark": (last.get("eventTime") or {}).get("watermark"),
    }


if __name__ == "__main__":
    sys.exit(main())
