import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the Java client (kafka-clients 3.9) against a cluster for the exactly-once tests.
 *
 *   ctp <bootstrap> <in> <out> <group> <txnId> <n> <abortEvery>
 *       consume-transform-produce: values "T:<input>:<batch>", every abortEvery-th batch aborted and
 *       re-read; prints "ABORTED <value>" for each aborted record and "DONE <batches>" at the end.
 *   fence <bootstrap> <out> <txnId>
 *       a producer opens a transaction, a second one with the same transactional id initializes; the first
 *       one's next send fails ("SEND_FAILED <exception>") and its abort says it is fenced ("FENCED <exception>").
 */
public class TxnHarness {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "ctp" -> ctp(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                Integer.parseInt(args[7]));
            case "fence" -> fence(args[1], args[2], args[3]);
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void ctp(String bootstrap, String in, String out, String group, String txnId, int n, int abortEvery) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 40);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = producer(bootstrap, txnId)) {
            consumer.subscribe(Collections.singletonList(in));
            producer.initTransactions();
            Set<String> done = new HashSet<>();
            int batch = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (done.size() < n) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("only " + done.size() + " of " + n + " processed");
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                if (recs.isEmpty()) {
                    continue;
                }
                batch++;
                producer.beginTransaction();
                List<String> sent = new ArrayList<>();
                List<String> sources = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<TopicPartition, Long> first = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = "T:" + new String(r.value()) + ":" + batch;
                    producer.send(new ProducerRecord<>(out, r.key(), v.getBytes()));
                    sent.add(v);
                    sources.add(new String(r.value()));
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    first.putIfAbsent(tp, r.offset());
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                }
                if (abortEvery > 0 && batch % abortEvery == 0) {
                    producer.flush();
                    producer.abortTransaction();
                    for (String v : sent) {
                        System.out.println("ABORTED " + v);
                    }
                    first.forEach(consumer::seek);
                    continue;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                done.addAll(sources);
            }
            System.out.println("DONE " + batch);
        }
    }

    static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && !(t instanceof ProducerFencedException)) {
            t = t.getCause();
        }
        return t;
    }

    static void fence(String bootstrap, String out, String txnId) throws Exception {
        KafkaProducer<byte[], byte[]> first = producer(bootstrap, txnId);
        first.initTransactions();
        first.beginTransaction();
        first.send(new ProducerRecord<>(out, "fenced".getBytes())).get();
        try (KafkaProducer<byte[], byte[]> second = producer(bootstrap, txnId)) {
            second.initTransactions();
            try {
                first.send(new ProducerRecord<>(out, "after".getBytes())).get();
                System.out.println("SEND_OK");
            } catch (Exception e) {
                // Since Kafka 2.7 a produce with a fenced epoch fails with InvalidProducerEpochException
                // (abortable); the abort that follows is where the producer learns it is fenced.
                System.out.println("SEND_FAILED " + rootCause(e).getClass().getName());
            }
            try {
                first.abortTransaction();
                System.out.println("NOT FENCED");
            } catch (Exception e) {
                System.out.println("FENCED " + rootCause(e).getClass().getName());
            } finally {
                first.close(Duration.ofSeconds(5));
            }
            second.beginTransaction();
            second.send(new ProducerRecord<>(out, "second".getBytes())).get();
            second.commitTransaction();
        }
        System.out.println("DONE");
    }
}
