import java.io.File;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Kafka 4.x (record classes under common.record.internal) copy of metadata-serde/MetadataDecode.java.
 * Decodes every data record of KRaft log segments and snapshots with Kafka's MetadataRecordSerde
 * (as a controller or broker replaying the log does), re-encodes it and compares the bytes.
 * Arguments: files (.log segments, .checkpoint snapshots). Prints one JSON object:
 * {"records": N, "types": {"RecordType": count, ...}, "errors": ["file offset: why", ...]}.
 */
public class MetadataDecode {
    public static void main(String[] args) throws Exception {
        int records = 0;
        Map<String, Integer> types = new TreeMap<>();
        List<String> errors = new ArrayList<>();
        for (String path : args) {
            // read as bytes: a live segment may grow meanwhile (an incomplete last batch is skipped)
            MemoryRecords file = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Paths.get(path))));
            {
                for (RecordBatch batch : file.batches()) {
                    if (batch.isControlBatch()) continue;
                    for (Record r : batch) {
                        records++;
                        String where = new File(path).getName() + " offset " + r.offset();
                        if (r.hasKey()) {
                            errors.add(where + ": has a key");
                            continue;
                        }
                        if (!r.hasValue()) {
                            errors.add(where + ": no value");
                            continue;
                        }
                        ByteBuffer value = r.value();
                        ByteBuffer original = value.duplicate();
                        try {
                            ApiMessageAndVersion m = MetadataRecordSerde.INSTANCE.read(
                                new ByteBufferAccessor(value), value.remaining());
                            String name = m.message().getClass().getSimpleName();
                            types.merge(name, 1, Integer::sum);
                            ObjectSerializationCache cache = new ObjectSerializationCache();
                            int size = MetadataRecordSerde.INSTANCE.recordSize(m, cache);
                            ByteBuffer out = ByteBuffer.allocate(size);
                            MetadataRecordSerde.INSTANCE.write(m, cache, new ByteBufferAccessor(out));
                            out.flip();
                            if (!out.equals(original)) {
                                errors.add(where + ": " + name + " v" + m.version() + " re-encodes differently");
                            }
                        } catch (Exception e) {
                            errors.add(where + ": " + e);
                        }
                    }
                }
            }
        }
        StringBuilder sb = new StringBuilder("{\"records\": " + records + ", \"types\": {");
        String sep = "";
        for (Map.Entry<String, Integer> e : types.entrySet()) {
            sb.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        sb.append("}, \"errors\": [");
        sep = "";
        for (String e : errors) {
            sb.append(sep).append('"').append(e.replace("\\", "\\\\").replace("\"", "'")).append('"');
            sep = ", ";
        }
        sb.append("]}");
        System.out.println(sb);
    }
}
