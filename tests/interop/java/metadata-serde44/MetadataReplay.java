import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.image.TopicImage;
import org.apache.kafka.metadata.BrokerRegistration;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Replays KRaft log segments into Kafka's own MetadataImage (MetadataDelta.replay, as a broker's
 * or controller's MetadataLoader does) and prints what the image then says, one line each:
 *   partition TOPIC-P leader=L isr=[..] elr=[..] lastKnownElr=[..] leaderEpoch=E partitionEpoch=PE
 *   broker ID fenced=B cordonedLogDirs=[..]
 *   controllers [..]
 * A record Kafka cannot decode or replay ends the run with exit code 1 and the exception.
 */
public class MetadataReplay {
    public static void main(String[] args) throws Exception {
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        long last = -1;
        for (String path : args) {
            MemoryRecords file = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Paths.get(path))));
            for (RecordBatch batch : file.batches()) {
                if (batch.isControlBatch()) continue;
                for (Record r : batch) {
                    ByteBuffer value = r.value();
                    ApiMessageAndVersion m = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(value),
                        value.remaining());
                    try {
                        delta.replay(m.message());
                    } catch (Exception e) {
                        System.out.println("fault at offset " + r.offset() + ": " + e);
                        System.exit(1);
                    }
                    last = r.offset();
                }
            }
        }
        MetadataImage image = delta.apply(new MetadataProvenance(last, 1, 0L, true));
        Map<String, String> lines = new TreeMap<>();
        for (TopicImage t : image.topics().topicsByName().values()) {
            for (Map.Entry<Integer, PartitionRegistration> e : t.partitions().entrySet()) {
                PartitionRegistration p = e.getValue();
                lines.put("partition " + t.name() + "-" + e.getKey(),
                    "leader=" + p.leader + " isr=" + Arrays.toString(p.isr) + " elr=" + Arrays.toString(p.elr)
                    + " lastKnownElr=" + Arrays.toString(p.lastKnownElr) + " leaderEpoch=" + p.leaderEpoch
                    + " partitionEpoch=" + p.partitionEpoch);
            }
        }
        for (BrokerRegistration b : image.cluster().brokers().values()) {
            lines.put("broker " + b.id(), "fenced=" + b.fenced());
        }
        lines.put("controllers", new TreeMap<>(image.cluster().controllers()).keySet().toString());
        for (Map.Entry<String, String> e : lines.entrySet()) {
            System.out.println(e.getKey() + " " + e.getValue());
        }
    }
}
