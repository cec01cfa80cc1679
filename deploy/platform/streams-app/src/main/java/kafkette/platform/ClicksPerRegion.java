package kafkette.platform;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Clicks per region and minute, each window's count emitted once, when the window has closed.
 *
 * <p>Input: {@code clicks} (key user, value page, the record timestamp is when the click happened) and
 * {@code users} (key user, value region), both with the same number of partitions. Each click is joined
 * with its user's region (KStream-KTable join), re-keyed by region (a repartition topic), counted in
 * one-minute tumbling windows (a windowed store with its changelog) and held back until the window
 * closes (suppress, with a changelog of its own), so the output topic gets one record per region and
 * window: key {@code <region>@<window start ms>}, value the count.
 *
 * <p>The grace period is long on purpose: records reach the counting task through the repartition
 * topic from several upstream tasks, which run apart (one may stall while another's instance fails
 * over), so a window must stay open until every upstream task is past it. A window closes once a
 * record later than its end plus the grace period reaches its counting task.
 *
 * <p>Usage: {@code ClicksPerRegion <config.properties>}. The file holds Kafka Streams settings
 * (bootstrap.servers, state.dir, ...) and these of the app: {@code clicks.topic}, {@code users.topic},
 * {@code output.topic}, {@code window.size.ms}, {@code window.grace.ms}. Progress lines on stdout
 * ({@code STATE ...}, {@code RESTORED ...}) let an operator, or a test, see what the instance does.
 */
public final class ClicksPerRegion {

    private ClicksPerRegion() {
    }

    public static Topology topology(String clicksTopic, String usersTopic, String outputTopic,
                                    Duration windowSize, Duration grace) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table(
                usersTopic, Consumed.with(Serdes.String(), Serdes.String()), Materialized.as("users"));
        KStream<String, String> clicks = builder.stream(clicksTopic, Consumed.with(Serdes.String(), Serdes.String()));
        clicks.join(users, (page, region) -> region)
                .selectKey((user, region) -> region)
                .groupByKey(Grouped.with("clicks-by-region", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(windowSize, grace))
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("clicks-per-region"))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final-counts"))
                .toStream()
                .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), Long.toString(count)))
                .to(outputTopic, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static Properties load(String path) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }

    /** Removes and returns one of the app's own settings, which Kafka Streams must not see. */
    private static String take(Properties props, String name, String fallback) {
        Object value = props.remove(name);
        return value == null ? fallback : value.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: ClicksPerRegion <config.properties>");
            System.exit(2);
        }
        Properties props = load(args[0]);
        String clicks = take(props, "clicks.topic", "clicks");
        String users = take(props, "users.topic", "users");
        String output = take(props, "output.topic", "clicks-per-region");
        Duration window = Duration.ofMillis(Long.parseLong(take(props, "window.size.ms", "60000")));
        Duration grace = Duration.ofMillis(Long.parseLong(take(props, "window.grace.ms", "86400000")));

        props.putIfAbsent(StreamsConfig.APPLICATION_ID_CONFIG, "clicks-per-region");
        props.putIfAbsent(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.putIfAbsent(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.putIfAbsent(StreamsConfig.REPLICATION_FACTOR_CONFIG, "3");

        KafkaStreams streams = new KafkaStreams(topology(clicks, users, output, window, grace), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
                say("RESTORING " + store + " " + partition + " from " + start + " to " + end);
            }

            @Override
            public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long count) {
            }

            @Override
            public void onRestoreEnd(TopicPartition partition, String store, long total) {
                say("RESTORED " + store + " " + partition + " records " + total);
            }
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            closed.countDown();
        }, "clicks-per-region-shutdown"));
        streams.start();
        closed.await();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
