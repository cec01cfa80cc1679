"""Realistic page-view events for the Spark pipeline, deterministic for a given seed.

Each event is one JSON object::

    {"event_id": "e-7-000042", "event_time": "2024-05-01T10:03:12.345Z", "user_id": "u0017",
     "session_id": "s0017-2", "page": "/products/42", "referrer": "https://www.google.com/",
     "user_agent": "...", "country": "DE", "duration_ms": 5210}

Arrivals follow a Poisson process over the requested span of event time; users and pages are drawn with
skewed (Zipf-like) weights; about one event in ten arrives late, up to ``max_delay_s`` after its event
time, so the topic holds events out of event-time order. Events are produced in arrival order, keyed by
user, with the arrival time as the Kafka record timestamp (CreateTime); ``event_time`` is in the value.
Nothing is generated after the current time: a span of event time that would end in the future is
refused, and a late event that would arrive in the future arrives now.

``generate()`` returns the events (no I/O; it reads the clock unless given ``now_ms``), ``produce()`` sends them with kafka-python and fills
in ``partition``/``offset``/``timestamp_ms`` from the broker's acknowledgements, so tests can compute the
expected windowed counts and offset/timestamp ranges on their own.

    python -m clients.pipeline.generate_events --bootstrap-servers localhost:9092 --topic page-views \
        --events 5000 --seed 7 --out events.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from clients.pipeline import client_security

DEFAULT_START = "2024-05-01T10:00:00Z"

PAGES = (
    ["/", "/search", "/cart", "/checkout", "/account", "/help", "/blog"]
    + [f"/products/{i}" for i in range(1, 13)]
    + [f"/blog/post-{i}" for i in range(1, 5)]
)
EXTERNAL_REFERRERS = [
    "https://www.google.com/", "https://duckduckgo.com/", "https://www.bing.com/",
    "https://news.ycombinator.com/", "https://t.co/", "https://www.reddit.com/r/shopping/",
]
USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36",
]
COUNTRIES = ["US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "NL", "SE"]


@dataclass
class PageView:
    event_id: str
    event_time_ms: int          # when the page was viewed (in the value, as ISO 8601)
    arrival_ms: int             # when it reached the pipeline (the Kafka record timestamp)
    user_id: str
    session_id: str
    page: str
    referrer: str | None        # None: typed in / bookmark
    user_agent: str
    country: str
    duration_ms: int
    # Filled in by produce():
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    @property
    def event_time(self) -> str:
        return iso_ms(self.event_time_ms)

    def value(self) -> dict[str, object]:
        return {
            "event_id": self.event_id, "event_time": self.event_time, "user_id": self.user_id,
            "session_id": self.session_id, "page": self.page, "referrer": self.referrer,
            "user_agent": self.user_agent, "country": self.country, "duration_ms": self.duration_ms,
        }

    def to_json(self) -> bytes:
        return json.dumps(self.value(), separators=(",", ":")).encode()

    def record(self) -> dict[str, object]:
        """The event plus where it landed: one line of the ``--out`` file."""
        return {**asdict(self), "event_time": self.event_time}


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_time_ms(text: str) -> int:
    """ISO 8601 (``...Z`` allowed) or integer epoch milliseconds."""
    if text.lstrip("-").isdigit():
        return int(text)
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (k ** s) for k in range(1, n + 1)]


def generate(n: int, *, seed: int = 1, start_ms: int | None = None, span_s: float = 3600.0,
             users: int = 150, late_fraction: float = 0.1, max_delay_s: float = 90.0,
             id_prefix: str | None = None, now_ms: int | None = None) -> list[PageView]:
    """``n`` page views with event times in ``[start_ms, start_ms + span_s)``, in arrival order.

    ``late_fraction`` of them arrive up to ``max_delay_s`` after their event time (the others within a
    second). Nothing happens after ``now_ms`` (default: the wall clock): a span that ends later is a
    ValueError, and an event whose delay would put its arrival in the future arrives at ``now_ms``.
    Events from the future would push a streaming job's watermark ahead of real time, and every later
    event would then count as late. Deterministic: the same arguments give the same events.
    """
    rng = random.Random(seed)
    start = parse_time_ms(DEFAULT_START) if start_ms is None else start_ms
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if n and start + int(span_s * 1000) > now:
        raise ValueError(f"event time from {iso_ms(start)} over {span_s:g}s would end at "
                         f"{iso_ms(start + int(span_s * 1000))}, after the current time {iso_ms(now)}")
    prefix = id_prefix if id_prefix is not None else f"e-{seed}"
    user_ids = [f"u{i:04d}" for i in range(users)]
    user_w = _zipf_weights(users, 0.9)
    page_w = _zipf_weights(len(PAGES), 1.0)
    rate = n / span_s
    sessions: dict[str, tuple[int, int, str]] = {}  # user -> (session number, last event ms, last page)
    events: list[PageView] = []
    t = float(start)
    for i in range(n):
        t += rng.expovariate(rate) * 1000.0
        event_ms = min(int(t), start + int(span_s * 1000) - 1)
        user = rng.choices(user_ids, user_w)[0]
        num, last_ms, last_page = sessions.get(user, (0, -(10**12), ""))
        new_session = event_ms - last_ms > 30 * 60 * 1000
        if new_session:
            num += 1
        page = rng.choices(PAGES, page_w)[0]
        if not new_session and rng.random() < 0.8:
            referrer: str | None = f"https://shop.example.com{last_page}"
        elif rng.random() < 0.35:
            referrer = None
        else:
            referrer = rng.choice(EXTERNAL_REFERRERS)
        sessions[user] = (num, event_ms, page)
        if rng.random() < late_fraction:
            delay_ms = rng.randint(1000, int(max_delay_s * 1000))
        else:
            delay_ms = rng.randint(5, 900)
        events.append(PageView(
            event_id=f"{prefix}-{i:06d}", event_time_ms=event_ms, arrival_ms=min(event_ms + delay_ms, now),
            user_id=user, session_id=f"s{user[1:]}-{num}", page=page, referrer=referrer,
            user_agent=rng.choice(USER_AGENTS), country=rng.choice(COUNTRIES),
            duration_ms=int(rng.lognormvariate(8.5, 0.8)),
        ))
    events.sort(key=lambda e: (e.arrival_ms, e.event_id))
    return events


def produce(events: list[PageView], bootstrap_servers: str, topic: str | list[str], *,
            acks: str | int = "all", timeout: float = 120.0,
            client_config: Mapping[str, Any] | None = None) -> list[PageView]:
    """Send ``events`` in order (keyed by user; record timestamp = arrival) and record where each landed.

    With a list of topics the events are spread over them round-robin by user (as if each region had
    its own topic). Raises if any send fails. ``client_config``: extra kafka-python arguments (the
    security settings of ``client_security.kafka_python_config``).
    """
    from kafka import KafkaProducer

    topics = [topic] if isinstance(topic, str) else list(topic)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, acks=acks, linger_ms=20, retries=10,
        max_in_flight_requests_per_connection=1, client_id="pipeline-generator", **(client_config or {}),
    )
    try:
        futures = []
        for e in events:
            t = topics[int(e.user_id[1:]) % len(topics)]
            futures.append((e, t, producer.send(t, key=e.user_id.encode(), value=e.to_json(), timestamp_ms=e.arrival_ms)))
        producer.flush(timeout)
        for e, t, fut in futures:
            md = fut.get(timeout)
            e.topic, e.partition, e.offset = t, md.partition, md.offset
    finally:
        producer.close(timeout)
    return events


def create_topics(bootstrap_servers: str, names: Iterable[str], partitions: int = 3, replication: int = 3,
                  configs: dict[str, str] | None = None, timeout: float = 60.0,
                  client_config: Mapping[str, Any] | None = None) -> None:
    """Create topics (those that exist are left alone) and wait until every partition has a leader."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    names = list(names)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="pipeline-admin", **(client_config or {}))
    try:
        for name in names:
            try:
                admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs or {})])
            except TopicAlreadyExistsError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            topics = admin.describe_topics(names)
            if len(topics) == len(names) and all(
                    t["error_code"] == 0 and t["partitions"] and all(p.get("leader_id", p.get("leader", -1)) >= 0 for p in t["partitions"])
                    for t in topics):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {names} have no leaders after {timeout}s: {topics}")
            time.sleep(0.2)
    finally:
        admin.close()


def window_counts(events: Iterable[PageView], window_s: int = 60) -> Counter[tuple[int, str]]:
    """Views per (window start in ms, page): what the streaming job must report."""
    w = window_s * 1000
    return Counter((e.event_time_ms - e.event_time_ms % w, e.page) for e in events)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="produce to this cluster (omit to only write --out)")
    ap.add_argument("--topic", action="append", help="target topic (repeat to spread over several)")
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", default=DEFAULT_START, help="first event time: ISO 8601 or epoch ms")
    ap.add_argument("--span-seconds", type=float, default=3600.0, help="event time covered by the events")
    ap.add_argument("--users", type=int, default=150)
    ap.add_argument("--late-fraction", type=float, default=0.1)
    ap.add_argument("--max-delay-seconds", type=float, default=90.0)
    ap.add_argument("--create-topics", action="store_true", help="create the topics first (3 partitions, RF 3)")
    ap.add_argument("--out", help="write the events, one JSON object a line (with partition/offset)")
    ap.add_argument("--command-config", metavar="FILE", help="Kafka client properties (security.protocol, sasl.*, ssl.*)")
    args = ap.parse_args(argv)
    client_config = client_security.kafka_python_config(client_security.load(args.command_config))
    try:
        events = generate(args.events, seed=args.seed, start_ms=parse_time_ms(args.start), span_s=args.span_seconds,
                          users=args.users, late_fraction=args.late_fraction, max_delay_s=args.max_delay_seconds)
    except ValueError as err:
        ap.error(str(err))
    if args.bootstrap_servers:
        topics = args.topic or ["page-views"]
        if args.create_topics:
            create_topics(args.bootstrap_servers, topics, configs={"retention.ms": "-1"}, client_config=client_config)
        produce(events, args.bootstrap_servers, topics, client_config=client_config)
    if args.out:
        with open(args.out, "w") as f:
            for e in events:
                f.write(json.dumps(e.record()) + "\n")
    late = sum(1 for e in events if e.arrival_ms - e.event_time_ms >= 1000)
    print(f"generated {len(events)} page views ({late} late) from {iso_ms(events[0].event_time_ms)}"
          if events else "generated 0 page views", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
