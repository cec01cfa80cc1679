import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads one partition from its beginning to its end offset with the Java consumer and prints one line
 * per record: "offset timestampType timestamp". Any error the consumer raises (a corrupt batch, a
 * decompression failure) ends the program with a stack trace and a non-zero status; so does not
 * reaching the end offset within the deadline.
 *
 * Usage: ConsumeToEnd bootstrap topic partition
 */
public class ConsumeToEnd {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        props.put("check.crcs", "true");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            long end = consumer.endOffsets(Collections.singletonList(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(tp) < end) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("did not reach end offset " + end + ", at " + consumer.position(tp));
                    System.exit(2);
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    System.out.println(r.offset() + " " + r.timestampType().name + " " + r.timestamp());
                }
            }
            System.out.println("END " + end);
        }
    }
}
