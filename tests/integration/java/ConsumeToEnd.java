import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads partitions, one after the other, from their beginning to their end offsets with the Java
 * consumer. Prints "topic partition offset timestampType timestamp" per record and
 * "END topic partition endOffset" per partition. Any error the consumer raises (a corrupt batch, a
 * decompression failure) ends the program with a stack trace and a non-zero status; so does not
 * reaching an end offset within a minute.
 *
 * Usage: ConsumeToEnd bootstrap topic:partition...
 */
public class ConsumeToEnd {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        props.put("check.crcs", "true");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            for (int i = 1; i < args.length; i++) {
                int colon = args[i].lastIndexOf(':');
                TopicPartition tp = new TopicPartition(args[i].substring(0, colon),
                                                       Integer.parseInt(args[i].substring(colon + 1)));
                consumer.assign(Collections.singletonList(tp));
                consumer.seekToBeginning(Collections.singletonList(tp));
                long end = consumer.endOffsets(Collections.singletonList(tp)).get(tp);
                long deadline = System.currentTimeMillis() + 60_000;
                while (consumer.position(tp) < end) {
                    if (System.currentTimeMillis() > deadline) {
                        System.err.println("did not reach end offset " + end + " of " + tp + ", at " + consumer.position(tp));
                        System.exit(2);
                    }
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        System.out.println(tp.topic() + " " + tp.partition() + " " + r.offset() + " "
                                           + r.timestampType().name + " " + r.timestamp());
                    }
                }
                System.out.println("END " + tp.topic() + " " + tp.partition() + " " + end);
            }
        }
    }
}
