import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.metadata.MetadataJsonConverters;
import org.apache.kafka.common.metadata.MetadataRecordType;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.protocol.Writable;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.metadata.bootstrap.BootstrapDirectory;
import org.apache.kafka.metadata.bootstrap.BootstrapMetadata;
import org.apache.kafka.raft.Batch;
import org.apache.kafka.raft.ControlRecord;
import org.apache.kafka.raft.ElectionState;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.raft.OffsetAndEpoch;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.serialization.RecordSerde;
import org.apache.kafka.snapshot.FileRawSnapshotReader;
import org.apache.kafka.snapshot.RecordsSnapshotReader;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LazyIndex;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.OffsetIndex;
import org.apache.kafka.storage.internals.log.OffsetPosition;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.TimeIndex;
import org.apache.kafka.storage.internals.log.TimestampOffset;
import org.apache.kafka.storage.internals.log.TransactionIndex;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Kafka 3.9's own storage classes as a judge of kraftnode's files. One JVM serves many
 * commands: one command per stdin line (words separated by tabs), one JSON object per
 * stdout line in answer.
 *
 *   verify  live|closed  LOG...     LogSegment.sanityCheck, Offset/TimeIndex.sanityCheck and the
 *                                   checks of kafka-dump-log.sh --verify-index-only, per segment;
 *                                   "closed": every segment's time index must also end with its
 *                                   final entry (as Kafka's roll/close/recover leave it); "live":
 *                                   not required of the last segment of each directory
 *   seg-open ID DIR BASE fresh|existing    a Kafka LogSegment (existing: reopened as LogLoader
 *                                          reopens the active segment: resizeIndexes)
 *   seg-append ID SRC POS LEN      the batches of SRC[POS, POS+LEN), one LogSegment.append per batch
 *   seg-append-chunk ID SRC POS LEN  the same bytes in ONE append (a Kafka 3.9 follower's call)
 *   seg-roll | seg-flush | seg-close | seg-recover ID ;  seg-truncate ID OFFSET
 *   quorum-state FILE ;  epoch-checkpoint FILE ;  snapshot DIR OFFSET EPOCH ;  bootstrap DIR
 *   snapshot-metadata DIR OFFSET EPOCH   RecordsSnapshotReader with MetadataRecordSerde (as a Kafka
 *                                        controller loads a snapshot): every batch, control record and
 *                                        data record (type, version, MetadataJsonConverters JSON as
 *                                        kafka-dump-log prints it, and the serde's re-encoding)
 *   snapshot-raw DIR OFFSET EPOCH        FileRawSnapshotReader's records, batch by batch: each record's
 *                                        key and value as stored (for keyed application records, which
 *                                        the raft RecordsIterator refuses)
 */
public class StorageCheck {
    static final ObjectMapper JSON = new ObjectMapper();
    static final LogConfig CONFIG = new LogConfig(new HashMap<>());   // Kafka's defaults: 10 MiB indexes, 4096 B interval
    static final Map<String, LogSegment> SEGMENTS = new HashMap<>();
    static final Map<String, File> SEGMENT_DIRS = new HashMap<>();

    /**
     * LogSegment.append as the release has it: Kafka 3.9.0's takes the largest offset, the
     * max timestamp and its shallow offset; 3.9.1+ and 4.x take the largest offset and the
     * records and find the max timestamp themselves (KAFKA-17146's follow-up).
     */
    static void append(LogSegment seg, long last, long maxTs, long shallow, MemoryRecords records) throws Exception {
        for (java.lang.reflect.Method m : LogSegment.class.getMethods()) {
            if (!m.getName().equals("append")) continue;
            try {
                if (m.getParameterCount() == 4) {
                    m.invoke(seg, last, maxTs, shallow, records);
                    return;
                }
                if (m.getParameterCount() == 2) {
                    m.invoke(seg, last, records);
                    return;
                }
            } catch (java.lang.reflect.InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) throw (Exception) cause;
                throw e;
            }
        }
        throw new IllegalStateException("this Kafka's LogSegment has no append this helper knows");
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, true);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] w = line.split("\t");
            ObjectNode res;
            try {
                res = run(w);
            } catch (Throwable t) {
                res = JSON.createObjectNode();
                StringWriter sw = new StringWriter();
                t.printStackTrace(new PrintWriter(sw));
                res.put("error", t.toString());
                res.put("trace", sw.toString());
            }
            out.println(JSON.writeValueAsString(res));
        }
    }

    static ObjectNode run(String[] w) throws Exception {
        ObjectNode res = JSON.createObjectNode();
        switch (w[0]) {
            case "verify": {
                boolean closed = w[1].equals("closed");
                ArrayNode findings = res.putArray("findings");
                Map<String, Long> lastBase = new HashMap<>();
                for (int i = 2; i < w.length; i++) {
                    File f = new File(w[i]);
                    lastBase.merge(f.getParent(), base(f), Math::max);
                }
                int n = 0;
                for (int i = 2; i < w.length; i++) {
                    File f = new File(w[i]);
                    boolean needFinal = closed || base(f) != lastBase.get(f.getParent());
                    for (String s : verifySegment(f, needFinal)) findings.add(f + ": " + s);
                    n++;
                }
                res.put("segments", n);
                return res;
            }
            case "seg-open": {
                File dir = new File(w[2]);
                long base = Long.parseLong(w[3]);
                boolean existing = w[4].equals("existing");
                LogSegment seg = LogSegment.open(dir, base, CONFIG, Time.SYSTEM, existing, 0, false, "");
                if (existing) seg.resizeIndexes(CONFIG.maxIndexSize);
                SEGMENTS.put(w[1], seg);
                SEGMENT_DIRS.put(w[1], dir);
                break;
            }
            case "seg-append":
            case "seg-append-chunk": {
                LogSegment seg = SEGMENTS.get(w[1]);
                ByteBuffer buf = readRange(new File(w[2]), Long.parseLong(w[3]), Integer.parseInt(w[4]));
                MemoryRecords records = MemoryRecords.readableRecords(buf);
                if (w[0].equals("seg-append")) {
                    for (MutableRecordBatch b : records.batches()) {
                        ByteBuffer slice = sliceOf(buf, b);
                        // a Kafka 3.9 leader's call for one batch (LogValidator: max timestamp of the
                        // batch, shallow offset = its last offset)
                        append(seg, b.lastOffset(), b.maxTimestamp(), b.lastOffset(), MemoryRecords.readableRecords(slice));
                    }
                } else {
                    // UnifiedLog.analyzeAndValidateRecords for a follower: the first batch with the
                    // largest max timestamp, one call for the whole chunk
                    long maxTs = RecordBatch.NO_TIMESTAMP, shallow = -1, last = -1;
                    for (MutableRecordBatch b : records.batches()) {
                        if (b.maxTimestamp() > maxTs) { maxTs = b.maxTimestamp(); shallow = b.lastOffset(); }
                        last = b.lastOffset();
                    }
                    append(seg, last, maxTs, shallow, records);
                }
                break;
            }
            case "seg-roll": SEGMENTS.get(w[1]).onBecomeInactiveSegment(); break;
            case "seg-flush": SEGMENTS.get(w[1]).flush(); break;
            case "seg-close": SEGMENTS.remove(w[1]).close(); break;
            case "seg-truncate": res.put("bytes", SEGMENTS.get(w[1]).truncateTo(Long.parseLong(w[2]))); break;
            case "seg-recover": {
                File dir = SEGMENT_DIRS.get(w[1]);
                ProducerStateManager psm = new ProducerStateManager(new TopicPartition("__cluster_metadata", 0), dir,
                    60000, new ProducerStateManagerConfig(86400000, false), Time.SYSTEM);
                res.put("bytes", SEGMENTS.get(w[1]).recover(psm, Optional.empty()));
                break;
            }
            case "quorum-state": {
                Optional<ElectionState> st = new FileQuorumStateStore(new File(w[1])).readElectionState();
                if (!st.isPresent()) { res.putNull("state"); break; }
                ElectionState e = st.get();
                ObjectNode s = res.putObject("state");
                s.put("epoch", e.epoch());
                s.put("leaderId", e.leaderIdOrSentinel());
                s.put("votedId", e.optionalVotedKey().map(k -> k.id()).orElse(-1));
                s.put("votedDirectoryId", e.optionalVotedKey().flatMap(k -> k.directoryId()).map(Object::toString).orElse(null));
                break;
            }
            case "epoch-checkpoint": {
                ArrayNode a = res.putArray("entries");
                for (EpochEntry e : new LeaderEpochCheckpointFile(new File(w[1]), new LogDirFailureChannel(1)).read())
                    a.addArray().add(e.epoch).add(e.startOffset);
                break;
            }
            case "snapshot": {
                OffsetAndEpoch id = new OffsetAndEpoch(Long.parseLong(w[2]), Integer.parseInt(w[3]));
                try (RecordsSnapshotReader<byte[]> r = RecordsSnapshotReader.of(
                        FileRawSnapshotReader.open(Paths.get(w[1]), id), new RawSerde(),
                        BufferSupplier.create(), 8 * 1024 * 1024, true)) {
                    res.put("lastContainedLogTimestamp", r.lastContainedLogTimestamp());
                    res.put("lastContainedLogOffset", r.lastContainedLogOffset());
                    res.put("lastContainedLogEpoch", r.lastContainedLogEpoch());
                    ArrayNode batches = res.putArray("batches");
                    while (r.hasNext()) {
                        Batch<byte[]> b = r.next();
                        ObjectNode o = batches.addObject();
                        o.put("baseOffset", b.baseOffset());
                        o.put("lastOffset", b.lastOffset());
                        o.put("epoch", b.epoch());
                        ArrayNode ctl = o.putArray("control");
                        for (ControlRecord c : b.controlRecords()) ctl.add(c.type() + " " + c.message());
                        ArrayNode recs = o.putArray("records");
                        ArrayNode meta = o.putArray("metadata");
                        for (byte[] v : b.records()) {
                            recs.add(Base64.getEncoder().encodeToString(v));
                            try {
                                ApiMessageAndVersion m = MetadataRecordSerde.INSTANCE.read(
                                    new ByteBufferAccessor(ByteBuffer.wrap(v)), v.length);
                                meta.add(m.message().getClass().getSimpleName() + " " + m.message());
                            } catch (RuntimeException notMetadata) {
                                meta.addNull();
                            }
                        }
                    }
                }
                break;
            }
            case "snapshot-metadata": {
                OffsetAndEpoch id = new OffsetAndEpoch(Long.parseLong(w[2]), Integer.parseInt(w[3]));
                try (RecordsSnapshotReader<ApiMessageAndVersion> r = RecordsSnapshotReader.of(
                        FileRawSnapshotReader.open(Paths.get(w[1]), id), MetadataRecordSerde.INSTANCE,
                        BufferSupplier.create(), 8 * 1024 * 1024, true)) {
                    res.put("snapshotOffset", r.snapshotId().offset());
                    res.put("snapshotEpoch", r.snapshotId().epoch());
                    res.put("lastContainedLogTimestamp", r.lastContainedLogTimestamp());
                    res.put("lastContainedLogOffset", r.lastContainedLogOffset());
                    res.put("lastContainedLogEpoch", r.lastContainedLogEpoch());
                    ArrayNode batches = res.putArray("batches");
                    while (r.hasNext()) {
                        Batch<ApiMessageAndVersion> b = r.next();
                        ObjectNode o = batches.addObject();
                        o.put("baseOffset", b.baseOffset());
                        o.put("lastOffset", b.lastOffset());
                        o.put("epoch", b.epoch());
                        o.put("appendTimestamp", b.appendTimestamp());
                        ArrayNode ctl = o.putArray("control");
                        for (ControlRecord c : b.controlRecords()) ctl.add(c.type() + " " + c.message());
                        ArrayNode recs = o.putArray("records");
                        for (ApiMessageAndVersion m : b.records()) {
                            ObjectNode rec = recs.addObject();
                            rec.put("type", MetadataRecordType.fromId(m.message().apiKey()).toString());
                            rec.put("version", m.version());
                            rec.set("data", MetadataJsonConverters.writeJson(m.message(), m.version()));
                            ObjectSerializationCache cache = new ObjectSerializationCache();
                            int size = MetadataRecordSerde.INSTANCE.recordSize(m, cache);
                            ByteBuffer buf = ByteBuffer.allocate(size);
                            MetadataRecordSerde.INSTANCE.write(m, cache, new ByteBufferAccessor(buf));
                            rec.put("bytes", Base64.getEncoder().encodeToString(buf.array()));
                        }
                    }
                }
                break;
            }
            case "snapshot-raw": {
                OffsetAndEpoch id = new OffsetAndEpoch(Long.parseLong(w[2]), Integer.parseInt(w[3]));
                try (FileRawSnapshotReader raw = FileRawSnapshotReader.open(Paths.get(w[1]), id)) {
                    res.put("sizeInBytes", raw.sizeInBytes());
                    ArrayNode batches = res.putArray("batches");
                    for (RecordBatch b : raw.records().batches()) {
                        b.ensureValid();
                        ObjectNode o = batches.addObject();
                        o.put("baseOffset", b.baseOffset());
                        o.put("lastOffset", b.lastOffset());
                        o.put("epoch", b.partitionLeaderEpoch());
                        o.put("isControl", b.isControlBatch());
                        ArrayNode recs = o.putArray("records");
                        for (Record rec : b) {
                            ArrayNode kv = recs.addArray();
                            kv.add(rec.hasKey() ? Base64.getEncoder().encodeToString(bytes(rec.key())) : null);
                            kv.add(rec.hasValue() ? Base64.getEncoder().encodeToString(bytes(rec.value())) : null);
                        }
                    }
                }
                break;
            }
            case "bootstrap": {
                BootstrapMetadata m = new BootstrapDirectory(w[1], Optional.empty()).read();
                res.put("metadataVersion", m.metadataVersion().featureLevel());
                res.put("source", m.source());
                ArrayNode a = res.putArray("records");
                for (ApiMessageAndVersion r : m.records()) a.add(r.message().getClass().getSimpleName() + " " + r.message());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
        res.put("ok", true);
        return res;
    }

    static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    static long base(File log) {
        return Long.parseLong(log.getName().substring(0, log.getName().indexOf('.')));
    }

    static ByteBuffer readRange(File f, long pos, int len) throws Exception {
        try (RandomAccessFile raf = new RandomAccessFile(f, "r")) {
            byte[] b = new byte[len];
            raf.seek(pos);
            raf.readFully(b);
            return ByteBuffer.wrap(b);
        }
    }

    static ByteBuffer sliceOf(ByteBuffer all, MutableRecordBatch b) {
        // batches of MemoryRecords are views into its buffer, in order: find this one by offset
        ByteBuffer d = all.duplicate();
        int pos = 0;
        while (pos < d.limit()) {
            long baseOffset = d.getLong(pos);
            int size = d.getInt(pos + 8) + 12;
            if (baseOffset == b.baseOffset()) {
                ByteBuffer s = d.duplicate();
                s.position(pos).limit(pos + size);
                return s.slice();
            }
            pos += size;
        }
        throw new IllegalStateException("batch not found");
    }

    /** Every reason Kafka would have to reject or rebuild this segment's files. */
    static List<String> verifySegment(File logFile, boolean needFinalTimeEntry) throws Exception {
        List<String> bad = new ArrayList<>();
        long base = base(logFile);
        File dir = logFile.getParentFile();
        String stem = logFile.getName().substring(0, logFile.getName().indexOf('.'));
        File indexFile = new File(dir, stem + ".index");
        File timeFile = new File(dir, stem + ".timeindex");
        File txnFile = new File(dir, stem + ".txnindex");
        if (!timeFile.exists()) bad.add("time index file " + timeFile.getName() + " does not exist");
        // 1. LogSegment.sanityCheck, as LogLoader runs it on every segment at start-up
        FileRecords forSegment = FileRecords.open(logFile, false);
        TransactionIndex txn = new TransactionIndex(base, txnFile);
        LogSegment seg = new LogSegment(forSegment, LazyIndex.forOffset(indexFile, base, CONFIG.maxIndexSize),
            LazyIndex.forTime(timeFile, base, CONFIG.maxIndexSize), txn, base, CONFIG.indexInterval, 0, Time.SYSTEM);
        try {
            seg.sanityCheck(false);
        } catch (NoSuchFileException e) {
            bad.add("LogSegment.sanityCheck: NoSuchFileException: " + e.getMessage());
        } catch (Exception e) {
            bad.add("LogSegment.sanityCheck: " + e);
        } finally {
            forSegment.closeHandlers();
            txn.close();
        }
        if (!indexFile.exists() || !timeFile.exists()) return bad;
        // 2. the log: every batch valid, offsets contiguous from the base offset
        // the indexes before the log: on a live node every entry then names bytes already written
        OffsetIndex index = new OffsetIndex(indexFile, base, -1, false);
        TimeIndex timeIndex = new TimeIndex(timeFile, base, -1, false);
        FileRecords log = FileRecords.open(logFile, false);
        try {
            long expected = base, maxTs = RecordBatch.NO_TIMESTAMP, offsetOfMaxTs = base;
            TreeMap<Integer, FileChannelRecordBatch> byPosition = new TreeMap<>();
            for (FileChannelRecordBatch b : log.batches()) {
                try {
                    b.ensureValid();
                } catch (RuntimeException e) {
                    bad.add("batch at position " + b.position() + ": " + e.getMessage());
                    break;
                }
                if (b.baseOffset() != expected) bad.add("batch at position " + b.position() + " starts at offset "
                    + b.baseOffset() + ", expected " + expected);
                expected = b.lastOffset() + 1;
                if (b.maxTimestamp() > maxTs) { maxTs = b.maxTimestamp(); offsetOfMaxTs = b.lastOffset(); }
            }
            // 3. OffsetIndex / TimeIndex sanityCheck (kafka-dump-log.sh --index-sanity-check)
            try { index.sanityCheck(); } catch (Exception e) { bad.add("OffsetIndex.sanityCheck: " + e.getMessage()); }
            try { timeIndex.sanityCheck(); } catch (Exception e) { bad.add("TimeIndex.sanityCheck: " + e.getMessage()); }
            // 4. kafka-dump-log.sh --verify-index-only on the .index (DumpLogSegments.dumpIndex)
            long prevOffset = -1;
            int prevPosition = -1;
            for (int i = 0; i < index.entries(); i++) {
                OffsetPosition e = index.entry(i);
                if (e.offset == base && i > 0) {
                    bad.add(indexFile.getName() + ": entry " + i + " is a zero entry (a preallocated tail left behind)");
                    break;
                }
                if (e.offset <= prevOffset || e.position <= prevPosition)
                    bad.add(indexFile.getName() + ": entry " + i + " (" + e.offset + ", " + e.position + ") does not increase");
                prevOffset = e.offset;
                prevPosition = e.position;
                if (e.position >= log.sizeInBytes()) {
                    bad.add(indexFile.getName() + ": entry " + i + " points past the log: " + e.position);
                    continue;
                }
                Iterator<FileChannelRecordBatch> it = log.slice(e.position, Integer.MAX_VALUE).batches().iterator();
                if (!it.hasNext()) { bad.add(indexFile.getName() + ": no batch at position " + e.position); continue; }
                long firstBatchLastOffset = it.next().lastOffset();
                if (firstBatchLastOffset != e.offset)
                    bad.add("Mismatches in " + indexFile.getName() + ": Index offset: " + e.offset + ", log offset: " + firstBatchLastOffset);
            }
            // 5. kafka-dump-log.sh --verify-index-only on the .timeindex (DumpLogSegments.dumpTimeIndex)
            long prevTimestamp = RecordBatch.NO_TIMESTAMP;
            TimestampOffset lastEntry = null;
            for (int i = 0; i < timeIndex.entries(); i++) {
                TimestampOffset e = timeIndex.entry(i);
                lastEntry = e;
                if (e.offset == base && i > 0) {
                    bad.add(timeFile.getName() + ": entry " + i + " is a zero entry (a preallocated tail left behind)");
                    break;
                }
                int position = index.lookup(e.offset).position;
                FileChannelRecordBatch found = null;
                for (FileChannelRecordBatch b : log.slice(position, Integer.MAX_VALUE).batches()) {
                    if (b.lastOffset() >= e.offset) { found = b; break; }
                }
                if (found == null || found.lastOffset() != e.offset) {
                    bad.add(timeFile.getName() + ": the index has timestamp " + e.timestamp + " at offset " + e.offset
                        + " but the log has no batch ending there" + (found == null ? "" : " (found " + found.lastOffset() + ")"));
                } else {
                    long recordsMax = RecordBatch.NO_TIMESTAMP;
                    for (Record r : found) recordsMax = Math.max(recordsMax, r.timestamp());
                    if (recordsMax != e.timestamp)
                        bad.add(timeFile.getName() + ": found timestamp mismatch: index timestamp " + e.timestamp
                            + ", log timestamp " + recordsMax);
                    if (prevTimestamp >= e.timestamp)
                        bad.add(timeFile.getName() + ": found out of order timestamp: index timestamp " + e.timestamp
                            + ", previously indexed timestamp " + prevTimestamp);
                }
                prevTimestamp = e.timestamp;
            }
            // 6. the final entry Kafka's roll (onBecomeInactiveSegment), close() and recover() append
            if (needFinalTimeEntry && maxTs >= 0 && (lastEntry == null || lastEntry.timestamp != maxTs
                    || lastEntry.offset != offsetOfMaxTs))
                bad.add(timeFile.getName() + ": last entry " + lastEntry + " is not the final entry (" + maxTs + ", "
                    + offsetOfMaxTs + ")");
        } finally {
            log.closeHandlers();
            index.closeHandler();
            timeIndex.closeHandler();
        }
        return bad;
    }

    /** Data records as their raw bytes (kraftnode snapshots may hold application records). */
    static final class RawSerde implements RecordSerde<byte[]> {
        public int recordSize(byte[] data, ObjectSerializationCache cache) { return data.length; }
        public void write(byte[] data, ObjectSerializationCache cache, Writable out) { out.writeByteArray(data); }
        public byte[] read(Readable input, int size) { return input.readArray(size); }
    }
}
