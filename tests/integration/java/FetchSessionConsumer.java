import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Java consumer driven line by line from standard input, for the fetch session tests.
 *
 * Commands:
 *   assign topic:partition,...   assign exactly these partitions (kept ones keep their positions,
 *                                new ones start at the beginning); prints "OK"
 *   poll count timeoutMs         poll until count records arrived or the time is up; prints
 *                                "R topic partition offset value" per record, then "DONE n"
 *   quit                         close the consumer and exit
 *
 * Usage: FetchSessionConsumer bootstrap
 */
public class FetchSessionConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("metadata.max.age.ms", "1000");
        props.put("fetch.max.wait.ms", "100");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split(" ");
                if (words[0].equals("assign")) {
                    List<TopicPartition> tps = new ArrayList<>();
                    if (words.length > 1) {
                        for (String tp : words[1].split(",")) {
                            int colon = tp.lastIndexOf(':');
                            tps.add(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))));
                        }
                    }
                    consumer.assign(tps);
                    System.out.println("OK");
                } else if (words[0].equals("poll")) {
                    int want = Integer.parseInt(words[1]);
                    long deadline = System.currentTimeMillis() + Long.parseLong(words[2]);
                    int got = 0;
                    while (got < want && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                            System.out.println("R " + r.topic() + " " + r.partition() + " " + r.offset() + " "
                                               + new String(r.value(), StandardCharsets.UTF_8));
                            got++;
                        }
                    }
                    System.out.println("DONE " + got);
                } else if (words[0].equals("quit")) {
                    break;
                }
                System.out.flush();
            }
        }
    }
}
