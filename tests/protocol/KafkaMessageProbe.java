import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HexFormat;

/**
 * Kafka 3.9's own message classes and record builders, driven line by line from a test.
 *
 * Each input line is a JSON object; each answer one JSON line:
 *   {"op":"message","name":"Fetch","kind":"Request","version":3,"json":{...},"ours":"<hex>"}
 *       -> {"encoded": hex of Kafka's encoding of json, "decoded": Kafka's JSON of ours decoded,
 *           "reencoded": hex of Kafka's encoding of ours decoded}
 *   {"op":"parse_records","hex":"..."} -> {"batches":[{magic, compression, timestampType, valid,
 *       baseOffset, lastOffset, records:[{offset, timestamp, key, value}]}]}   (keys/values base64)
 *   {"op":"build_records","magic":1,"codec":"gzip","timestampType":"CreateTime","logAppendTime":-1,
 *    "baseOffset":0,"records":[{offset, timestamp, key, value}]} -> {"hex": ...}
 * Errors answer {"error": "..."}.
 */
public class KafkaMessageProbe {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            ObjectNode answer;
            try {
                answer = handle(MAPPER.readTree(line));
            } catch (Throwable t) {
                Throwable cause = t instanceof InvocationTargetException ? t.getCause() : t;
                answer = MAPPER.createObjectNode();
                answer.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
            }
            out.println(MAPPER.writeValueAsString(answer));
            out.flush();
        }
    }

    private static ObjectNode handle(JsonNode req) throws Exception {
        switch (req.get("op").asText()) {
            case "message": return message(req);
            case "parse_records": return parseRecords(req);
            case "build_records": return buildRecords(req);
            default: throw new IllegalArgumentException("unknown op");
        }
    }

    private static byte[] bytes(ByteBuffer buf) {
        byte[] b = new byte[buf.remaining()];
        buf.duplicate().get(b);
        return b;
    }

    private static ObjectNode message(JsonNode req) throws Exception {
        String base = "org.apache.kafka.common.message." + req.get("name").asText() + req.get("kind").asText() + "Data";
        short version = (short) req.get("version").asInt();
        Class<?> data = Class.forName(base);
        Class<?> converter = Class.forName(base + "JsonConverter");
        Method read = converter.getMethod("read", JsonNode.class, short.class);
        Method write = converter.getMethod("write", data, short.class, boolean.class);
        Constructor<?> parse = data.getConstructor(Readable.class, short.class);
        ObjectNode answer = MAPPER.createObjectNode();
        ApiMessage fromJson = (ApiMessage) read.invoke(null, req.get("json"), version);
        answer.put("encoded", HEX.formatHex(bytes(MessageUtil.toByteBuffer(fromJson, version))));
        byte[] ours = HEX.parseHex(req.get("ours").asText());
        ApiMessage decoded = (ApiMessage) parse.newInstance(new ByteBufferAccessor(ByteBuffer.wrap(ours)), version);
        answer.set("decoded", (JsonNode) write.invoke(null, decoded, version, true));
        answer.put("reencoded", HEX.formatHex(bytes(MessageUtil.toByteBuffer(decoded, version))));
        return answer;
    }

    private static String b64(ByteBuffer buf) {
        return buf == null ? null : Base64.getEncoder().encodeToString(bytes(buf));
    }

    private static ObjectNode parseRecords(JsonNode req) {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(HEX.parseHex(req.get("hex").asText())));
        ObjectNode answer = MAPPER.createObjectNode();
        ArrayNode batches = answer.putArray("batches");
        for (RecordBatch batch : records.batches()) {
            ObjectNode b = batches.addObject();
            b.put("magic", batch.magic());
            b.put("compression", batch.compressionType().name);
            b.put("timestampType", batch.timestampType().name);
            b.put("valid", batch.isValid());
            b.put("baseOffset", batch.baseOffset());
            b.put("lastOffset", batch.lastOffset());
            b.put("maxTimestamp", batch.maxTimestamp());
            ArrayNode rs = b.putArray("records");
            for (Record r : batch) {
                ObjectNode o = rs.addObject();
                o.put("offset", r.offset());
                o.put("timestamp", r.timestamp());
                o.put("key", b64(r.key()));
                o.put("value", b64(r.value()));
            }
        }
        return answer;
    }

    private static ByteBuffer decode64(JsonNode node) {
        return node == null || node.isNull() ? null : ByteBuffer.wrap(Base64.getDecoder().decode(node.asText()));
    }

    private static ObjectNode buildRecords(JsonNode req) {
        byte magic = (byte) req.get("magic").asInt();
        CompressionType codec = CompressionType.forName(req.get("codec").asText());
        TimestampType type = TimestampType.forName(req.get("timestampType").asText());
        long logAppendTime = req.get("logAppendTime").asLong();
        ByteBuffer buffer = ByteBuffer.allocate(1 << 16);
        MemoryRecordsBuilder builder = MemoryRecords.builder(buffer, magic, Compression.of(codec).build(), type,
            req.get("baseOffset").asLong(), logAppendTime);
        for (JsonNode r : req.get("records")) {
            builder.appendWithOffset(r.get("offset").asLong(), r.get("timestamp").asLong(), decode64(r.get("key")),
                decode64(r.get("value")));
        }
        ObjectNode answer = MAPPER.createObjectNode();
        answer.put("hex", HEX.formatHex(bytes(builder.build().buffer())));
        return answer;
    }
}
