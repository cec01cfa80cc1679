import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

import kafka.coordinator.transaction.TransactionLog;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;

/**
 * Kafka's own encoding of __transaction_state keys and values, and its decoding of ours.
 *
 *   encode                      -> lines "key <hex>" and "value <version> <state> <hex>" for fixed cases
 *   decode <txnId> <valueHex>   -> Kafka's TransactionMetadata.toString of the value
 */
public class TxnLogProbe {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) {
        if (args.length > 0 && args[0].equals("decode")) {
            ByteBuffer buf = ByteBuffer.wrap(HEX.parseHex(args[2]));
            System.out.println(TransactionLog.readTxnRecordValue(args[1], buf).get());
            return;
        }
        System.out.println("key " + HEX.formatHex(MessageUtil.toVersionPrefixedBytes((short) 0,
            new TransactionLogKey().setTransactionalId("my-txn"))));
        System.out.println("key " + HEX.formatHex(MessageUtil.toVersionPrefixedBytes((short) 0,
            new TransactionLogKey().setTransactionalId("tx-\u00e9\u4e2d"))));
        for (short version = 0; version <= 1; version++) {
            for (byte state = 0; state <= 5; state++) {
                List<TransactionLogValue.PartitionsSchema> parts = null;
                if (state != 0) {
                    parts = new ArrayList<>();
                    parts.add(new TransactionLogValue.PartitionsSchema().setTopic("a").setPartitionIds(Arrays.asList(0, 2)));
                    parts.add(new TransactionLogValue.PartitionsSchema().setTopic("b").setPartitionIds(Arrays.asList(1)));
                }
                TransactionLogValue v = new TransactionLogValue()
                    .setProducerId(1000L + state)
                    .setProducerEpoch((short) 3)
                    .setTransactionTimeoutMs(60000)
                    .setTransactionStatus(state)
                    .setTransactionPartitions(parts)
                    .setTransactionLastUpdateTimestampMs(1700000000123L)
                    .setTransactionStartTimestampMs(state == 0 ? -1L : 1700000000000L);
                System.out.println("value " + version + " " + state + " "
                    + HEX.formatHex(MessageUtil.toVersionPrefixedBytes(version, v)));
            }
        }
    }
}
