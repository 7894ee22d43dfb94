import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** A standalone consumer of a simple group: assign(), read up to N records, commitSync().
 *  Prints "start <position>" (the committed offset it resumed from) and "committed <offset>". */
public class AssignCommit {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int n = Integer.parseInt(args[2]);
        TopicPartition tp = new TopicPartition(args[3], 0);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            long start = c.position(tp, Duration.ofSeconds(60));
            System.out.println("start " + start);
            int read = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (read < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    if (read < n) { read++; c.seek(tp, r.offset() + 1); }
                }
            }
            c.commitSync(Duration.ofSeconds(60));
            System.out.println("committed " + c.committed(java.util.Set.of(tp)).get(tp).offset());
        }
    }
}
