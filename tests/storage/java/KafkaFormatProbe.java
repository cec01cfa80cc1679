// Cross-checks kafkette's on-disk formats with Apache Kafka's own storage classes.
//   write <dir>: Kafka writes segments, indexes, a txn index, a producer snapshot and a leader epoch
//                checkpoint into <dir> (kafkette must read them).
//   read <dir>:  Kafka opens kafkette's files in <dir> and prints what it finds, one fact per line.
import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.log.AbortedTxn;
import org.apache.kafka.storage.internals.log.BatchMetadata;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.OffsetIndex;
import org.apache.kafka.storage.internals.log.OffsetPosition;
import org.apache.kafka.storage.internals.log.ProducerStateEntry;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.TimeIndex;
import org.apache.kafka.storage.internals.log.TimestampOffset;
import org.apache.kafka.storage.internals.log.TransactionIndex;

public class KafkaFormatProbe {
    static final long TS0 = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        File dir = new File(args[1]);
        if (args[0].equals("write")) write(dir);
        else read(dir);
    }

    static LogConfig config() {
        Map<String, Object> props = new HashMap<>();
        props.put("segment.index.bytes", 4096);
        props.put("index.interval.bytes", 256);
        return new LogConfig(props);
    }

    static void write(File dir) throws Exception {
        dir.mkdirs();
        long offset = 0;
        for (int s = 0; s < 2; s++) {
            LogSegment seg = LogSegment.open(dir, offset, config(), Time.SYSTEM, 0, false);
            for (int b = 0; b < 20; b++) {
                Compression compression = (b % 3 == 0) ? Compression.gzip().build() : Compression.NONE;
                SimpleRecord[] recs = new SimpleRecord[3];
                for (int r = 0; r < 3; r++) {
                    long o = offset + r;
                    recs[r] = new SimpleRecord(TS0 + o, ("key-" + o).getBytes(), ("value-" + o).getBytes());
                }
                seg.append(offset + 2, MemoryRecords.withRecords(offset, compression, 5 + s, recs));
                offset += 3;
            }
            seg.onBecomeInactiveSegment();
            seg.flush();
            seg.close();
        }
        new LeaderEpochCheckpointFile(new File(dir, "leader-epoch-checkpoint"), new LogDirFailureChannel(1))
            .write(Arrays.asList(new EpochEntry(5, 0), new EpochEntry(6, 60)));
        Map<Long, ProducerStateEntry> producers = new HashMap<>();
        producers.put(42L, new ProducerStateEntry(42L, (short) 3, 7, TS0 + 99, OptionalLong.of(100L),
            Optional.of(new BatchMetadata(9, 118L, 2, TS0 + 99))));
        ProducerStateManager.writeSnapshot(new File(dir, String.format("%020d.snapshot", 120)), producers, true);
        TransactionIndex txn = new TransactionIndex(60, new File(dir, String.format("%020d.txnindex", 60)));
        txn.append(new AbortedTxn(42L, 61L, 70L, 61L));
        txn.flush();
        txn.close();
    }

    static void read(File dir) throws Exception {
        File[] files = dir.listFiles();
        Arrays.sort(files);
        for (File f : files) {
            String name = f.getName();
            if (name.endsWith(".log")) readSegment(dir, Long.parseLong(name.substring(0, 20)));
            else if (name.endsWith(".snapshot")) {
                for (ProducerStateEntry e : ProducerStateManager.readSnapshot(f)) {
                    System.out.println("snapshot " + name + " pid=" + e.producerId() + " epoch=" + e.producerEpoch()
                        + " lastSeq=" + e.lastSeq() + " lastOffset=" + e.lastDataOffset()
                        + " offsetDelta=" + e.lastOffsetDelta() + " ts=" + e.lastTimestamp()
                        + " coordinatorEpoch=" + e.coordinatorEpoch()
                        + " txnFirst=" + e.currentTxnFirstOffset().orElse(-1L));
                }
            } else if (name.equals("leader-epoch-checkpoint")) {
                for (EpochEntry e : new LeaderEpochCheckpointFile(f, new LogDirFailureChannel(1)).read())
                    System.out.println("epoch " + e.epoch + " " + e.startOffset);
            }
        }
    }

    static void readSegment(File dir, long base) throws Exception {
        LogSegment seg = LogSegment.open(dir, base, config(), Time.SYSTEM, true, 0, false, "");
        seg.sanityCheck(false);
        OffsetIndex idx = seg.offsetIndex();
        idx.sanityCheck();
        for (int i = 0; i < idx.entries(); i++) {
            OffsetPosition p = idx.entry(i);
            System.out.println("oidx " + base + " " + p.offset + " " + p.position);
        }
        TimeIndex tidx = seg.timeIndex();
        tidx.sanityCheck();
        for (int i = 0; i < tidx.entries(); i++) {
            TimestampOffset t = tidx.entry(i);
            System.out.println("tidx " + base + " " + t.timestamp + " " + t.offset);
        }
        List<Long> offsets = new ArrayList<>();
        for (RecordBatch batch : seg.log().batches()) {
            batch.ensureValid();
            System.out.println("batch " + base + " " + batch.baseOffset() + " " + batch.lastOffset() + " epoch="
                + batch.partitionLeaderEpoch() + " pid=" + batch.producerId() + " seq=" + batch.baseSequence()
                + " txn=" + batch.isTransactional() + " control=" + batch.isControlBatch()
                + " codec=" + batch.compressionType().name + " valid=" + batch.isValid());
            for (Record r : batch) {
                offsets.add(r.offset());
                String key = r.hasKey() ? Utils.utf8(r.key()) : "null";
                String value = r.hasValue() ? Utils.utf8(r.value()) : "null";
                System.out.println("record " + r.offset() + " " + r.timestamp() + " " + key + " " + value);
            }
        }
        System.out.println("next " + base + " " + seg.readNextOffset());
        for (long o : offsets) {
            FileRecords.LogOffsetPosition p = seg.translateOffset(o);
            System.out.println("translate " + o + " " + p.offset + " " + p.position);
        }
        for (AbortedTxn t : seg.txnIndex().allAbortedTxns())
            System.out.println("aborted " + base + " " + t.producerId() + " " + t.firstOffset() + " " + t.lastOffset()
                + " " + t.lastStableOffset());
        ProducerStateManager psm = new ProducerStateManager(new TopicPartition("t", 0), dir, 60000,
            new ProducerStateManagerConfig(86400000, false), Time.SYSTEM);
        System.out.println("recover " + base + " truncated=" + seg.recover(psm, Optional.empty()));
    }
}
