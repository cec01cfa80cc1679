import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's side of the interoperability tests (tests/interop): produce, read, commit and
 * look up committed offsets, printing one tab-separated line per record or offset. Any error ends the
 * program with a stack trace and a non-zero status.
 *
 * Usage:
 *   InteropClient produce   bootstrap topic count prefix      "partition offset key value" per record
 *   InteropClient consume   bootstrap topic count             reads every partition from its beginning
 *   InteropClient committed bootstrap group topic             "partition offset" (-1: none)
 *   InteropClient commit    bootstrap group topic partition:offset...
 *       commits the offsets once per line read from standard input (and once at start), printing
 *       "committed" each time; ends at the end of its input. The Burrow test commits in a loop this way.
 */
public class InteropClient {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]), args[4]);
            case "consume" -> consume(args[1], args[2], Integer.parseInt(args[3]));
            case "committed" -> committed(args[1], args[2], args[3]);
            case "commit" -> commit(args[1], args[2], args[3], List.of(args).subList(4, args.length));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static void produce(String bootstrap, String topic, int count, String prefix) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, prefix + "-key-" + i, prefix + "-value-" + i)));
            }
            for (int i = 0; i < count; i++) {
                RecordMetadata md = sent.get(i).get();
                System.out.println(md.partition() + "\t" + md.offset() + "\t" + prefix + "-key-" + i + "\t"
                                   + prefix + "-value-" + i);
            }
        }
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        if (group != null) {
            props.put("group.id", group);
        }
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
            tps.add(new TopicPartition(topic, p.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    static void consume(String bootstrap, String topic, int count) {
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, null)) {
            List<TopicPartition> tps = partitions(consumer, topic);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            int received = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (received < count) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("received " + received + " of " + count + " records of " + topic);
                    System.exit(2);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println(r.partition() + "\t" + r.offset() + "\t" + r.key() + "\t" + r.value());
                    received++;
                }
            }
        }
    }

    static void committed(String bootstrap, String group, String topic) {
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, group)) {
            List<TopicPartition> tps = partitions(consumer, topic);
            Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(new HashSet<>(tps), Duration.ofSeconds(30));
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = offsets.get(tp);
                System.out.println(tp.partition() + "\t" + (om == null ? -1 : om.offset()));
            }
        }
    }

    static void commit(String bootstrap, String group, String topic, List<String> positions) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (String position : positions) {
            String[] parts = position.split(":");
            offsets.put(new TopicPartition(topic, Integer.parseInt(parts[0])), new OffsetAndMetadata(Long.parseLong(parts[1])));
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, group)) {
            do {
                consumer.commitSync(offsets, Duration.ofSeconds(30));
                System.out.println("committed");
                System.out.flush();
            } while (in.readLine() != null);
        }
    }
}
