"""Batch job: read an exact slice of a topic and summarise it.

The slice is given the way Spark's Kafka source takes it:

* by offsets: ``--starting-offsets '{"page-views":{"0":100,"1":-2}}' --ending-offsets '{"page-views":{"0":200,"1":-1}}'``
  (per partition; ``-2`` is earliest, ``-1`` latest; the end is exclusive), or ``earliest``/``latest``;
* by record timestamp: ``--starting-offsets-by-timestamp '{"page-views":{"0":1714557600000}}'`` (and/or
  ``--ending-offsets-by-timestamp``): from the first record of each partition whose timestamp is at
  least the given epoch milliseconds (the broker's ListOffsets answers that), up to the ending one.

The records are parsed with the streaming job's schema and aggregated with SQL (views per page). The
result is one JSON document (``--output``, or stdout): the offset range actually read per partition,
per-page counts, and with ``--records`` every record's topic, partition, offset, timestamp and event id.

Several slices can be read in one Spark application with ``--spec FILE``: a JSON list of objects with the
same option names (``startingOffsets``, ``endingOffsets``, ``startingOffsetsByTimestamp``,
``endingOffsetsByTimestamp``, ``startingTimestamp``, ``endingTimestamp`` (one timestamp for every
partition), ``topic``/``topicPattern``, ``name``, ``records``); the output is then a list.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from clients.pipeline import client_security
from clients.pipeline.streaming_job import EVENT_SCHEMA, build_session

RANGE_OPTIONS = ("startingOffsets", "endingOffsets", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
                 "startingTimestamp", "endingTimestamp")

SUMMARY_SQL = """
SELECT page, count(*) AS views, count(DISTINCT user_id) AS users,
       date_format(min(event_time), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'") AS first_event_time,
       date_format(max(event_time), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'") AS last_event_time
FROM batch_page_views
GROUP BY page
ORDER BY views DESC, page
"""


def read_slice(spark: SparkSession, bootstrap_servers: str, spec: dict[str, Any], with_records: bool,
               security: dict[str, str] | None = None) -> dict[str, Any]:
    opts = {"kafka.bootstrap.servers": bootstrap_servers, "failOnDataLoss": "true",
            "kafka.client.id": "kafkette-pipeline-batch", **(security or {})}
    if spec.get("topicPattern"):
        opts["subscribePattern"] = spec["topicPattern"]
    else:
        opts["subscribe"] = spec["topic"]
    for name in RANGE_OPTIONS:
        value = spec.get(name)
        if value is not None:
            opts[name] = value if isinstance(value, str) else json.dumps(value)
    raw = spark.read.format("kafka").options(**opts).load()
    rows = raw.select(
        "topic", "partition", "offset", F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
    ).select("topic", "partition", "offset", "timestamp_ms", "e.*").cache()
    rows.createOrReplaceTempView("batch_page_views")

    ranges: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows.groupBy("topic", "partition").agg(
            F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("n"),
            F.min("timestamp_ms").alias("min_ts"), F.max("timestamp_ms").alias("max_ts")).collect():
        ranges.setdefault(r["topic"], {})[str(r["partition"])] = {
            "first_offset": r["first"], "last_offset": r["last"], "records": r["n"],
            "min_timestamp_ms": r["min_ts"], "max_timestamp_ms": r["max_ts"]}
    pages = [
        {"page": r["page"], "views": r["views"], "users": r["users"],
         "first_event_time": r["first_event_time"], "last_event_time": r["last_event_time"]}
        for r in spark.sql(SUMMARY_SQL).collect()
    ]
    result: dict[str, Any] = {"name": spec.get("name"), "options": {k: v for k, v in opts.items() if k in RANGE_OPTIONS},
                              "records_read": sum(p["records"] for t in ranges.values() for p in t.values()),
                              "ranges": ranges, "pages": pages}
    if with_records:
        result["records"] = [
            {"topic": r["topic"], "partition": r["partition"], "offset": r["offset"],
             "timestamp_ms": r["timestamp_ms"], "event_id": r["event_id"]}
            for r in rows.select("topic", "partition", "offset", "timestamp_ms", "event_id")
            .orderBy("topic", "partition", "offset").collect()
        ]
    rows.unpersist()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Read an exact offset or timestamp range of a topic.")
    ap.add_argument("--bootstrap-servers", required=True)
    ap.add_argument("--topic", help="topic(s) to read, comma-separated (subscribe)")
    ap.add_argument("--topic-pattern", help="regex of topics to read (subscribePattern)")
    ap.add_argument("--starting-offsets", help="'earliest' or JSON {topic: {partition: offset}}")
    ap.add_argument("--ending-offsets", help="'latest' or JSON {topic: {partition: offset}} (exclusive)")
    ap.add_argument("--starting-offsets-by-timestamp", help="JSON {topic: {partition: epoch ms}}")
    ap.add_argument("--ending-offsets-by-timestamp", help="JSON {topic: {partition: epoch ms}}")
    ap.add_argument("--spec", help="JSON file: a list of slices to read (see the module doc)")
    ap.add_argument("--records", action="store_true", help="include every record's position in the output")
    ap.add_argument("--output", help="write the JSON result here instead of stdout")
    ap.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties (security.protocol, sasl.*, ssl.*), passed as kafka.* options")
    args = ap.parse_args(argv)
    security = client_security.spark_options(client_security.load(args.command_config))

    if args.spec:
        with open(args.spec) as f:
            specs = json.load(f)
    else:
        if not (args.topic or args.topic_pattern):
            ap.error("--topic, --topic-pattern or --spec is required")
        specs = [{"topic": args.topic, "topicPattern": args.topic_pattern,
                  "startingOffsets": args.starting_offsets, "endingOffsets": args.ending_offsets,
                  "startingOffsetsByTimestamp": args.starting_offsets_by_timestamp,
                  "endingOffsetsByTimestamp": args.ending_offsets_by_timestamp}]

    spark = build_session("kafkette-page-views-batch")
    try:
        results = [read_slice(spark, args.bootstrap_servers, s, args.records or bool(s.get("records")), security)
                   for s in specs]
    finally:
        spark.stop()
    out = json.dumps(results if args.spec else results[0], indent=2, default=str)
    if args.output:
        with open(args.output, "w") as f:
            f.write(out + "\n")
    else:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
