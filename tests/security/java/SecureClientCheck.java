import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One client's round trip over whatever security the properties file sets (security.protocol,
 * sasl.*, ssl.*): the Java client 3.9.1 as an application uses it.
 *
 * 1. An idempotent acks=all producer sends N records ("k-i" -> "v-i").
 * 2. A consumer in group "<topic>-java" subscribes, reads all N, commits, and checks that the
 *    committed offsets are the partitions' end offsets.
 * 3. A transactional producer ("<topic>-java-txn") commits one transaction of N records ("t-i") and
 *    aborts another ("a-i").
 * 4. A read_committed consumer reads every partition from its beginning to its end: it must see each
 *    "v-i" and "t-i" exactly once and no "a-i".
 *
 * Prints one line per step and "OK" at the end; exits 0 only if every step matched, 1 on a mismatch
 * (a "MISMATCH ..." line says which), and with a stack trace on any client error.
 *
 * Usage: SecureClientCheck client.properties bootstrap topic records
 */
public class SecureClientCheck {
    private static final Duration STEP_TIMEOUT = Duration.ofSeconds(60);

    public static void main(String[] args) throws Exception {
        Properties common = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            common.load(in);
        }
        common.put("bootstrap.servers", args[1]);
        String topic = args[2];
        int n = Integer.parseInt(args[3]);

        produce(common, topic, n);
        System.out.println("produced " + n);

        int consumed = consumeInGroup(common, topic, n);
        System.out.println("consumed " + consumed + " in group " + topic + "-java and committed");

        transactions(common, topic, n);
        System.out.println("transaction committed " + n + ", transaction aborted " + n);

        readCommitted(common, topic, n);
        System.out.println("read_committed saw " + (2 * n) + " committed records and no aborted one");
        System.out.println("OK");
    }

    private static Properties producerProps(Properties common) {
        Properties p = new Properties();
        p.putAll(common);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    private static Properties consumerProps(Properties common) {
        Properties p = new Properties();
        p.putAll(common);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }

    private static void produce(Properties common, String topic, int n) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(common))) {
            List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "k-" + i, "v-" + i)));
            }
            for (java.util.concurrent.Future<?> ack : acks) {
                ack.get();  // a failed send throws here, with the broker's error
            }
        }
    }

    private static int consumeInGroup(Properties common, String topic, int n) {
        Properties p = consumerProps(common);
        p.put("group.id", topic + "-java");
        Set<String> seen = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (seen.size() < n) {
                if (System.nanoTime() > deadline) {
                    fail("group consumer saw " + seen.size() + " of " + n + " records");
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    if (!seen.add(r.value()) || !r.key().equals("k" + r.value().substring(1))) {
                        fail("group consumer: duplicate or mismatched record " + r);
                    }
                }
            }
            consumer.commitSync();
            List<TopicPartition> partitions = partitions(consumer, topic);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(new HashSet<>(partitions));
            for (TopicPartition tp : partitions) {
                long end = ends.get(tp);
                OffsetAndMetadata c = committed.get(tp);
                long at = c == null ? 0 : c.offset();
                if (end > 0 && at != end) {
                    fail("committed offset of " + tp + " is " + at + ", end offset " + end);
                }
            }
        }
        for (int i = 0; i < n; i++) {
            if (!seen.contains("v-" + i)) {
                fail("group consumer did not see v-" + i);
            }
        }
        return seen.size();
    }

    private static void transactions(Properties common, String topic, int n) {
        Properties p = producerProps(common);
        p.put("transactional.id", topic + "-java-txn");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k-" + i, "t-" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k-" + i, "a-" + i));
            }
            producer.flush();
            producer.abortTransaction();
        }
    }

    private static void readCommitted(Properties common, String topic, int n) {
        Properties p = consumerProps(common);
        p.put("isolation.level", "read_committed");
        Map<String, Integer> seen = new HashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> partitions = partitions(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            // For a read_committed consumer the end offsets are the last stable offsets: with no
            // transaction open, every marker has been written and the position reaches them.
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (!reached(consumer, ends)) {
                if (System.nanoTime() > deadline) {
                    fail("read_committed consumer did not reach the end offsets " + ends);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    seen.merge(r.value(), 1, Integer::sum);
                }
            }
        }
        for (int i = 0; i < n; i++) {
            for (String v : new String[] {"v-" + i, "t-" + i}) {
                if (seen.getOrDefault(v, 0) != 1) {
                    fail("read_committed consumer saw " + v + " " + seen.getOrDefault(v, 0) + " times");
                }
            }
            if (seen.containsKey("a-" + i)) {
                fail("read_committed consumer saw the aborted record a-" + i);
            }
        }
        if (seen.size() != 2 * n) {
            fail("read_committed consumer saw unexpected records: " + seen.keySet());
        }
    }

    private static boolean reached(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static List<TopicPartition> partitions(KafkaConsumer<String, String> consumer, String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, STEP_TIMEOUT)) {
            out.add(new TopicPartition(topic, info.partition()));
        }
        return out;
    }

    private static void fail(String why) {
        System.out.println("MISMATCH " + why);
        System.out.flush();
        System.exit(1);
    }
}
