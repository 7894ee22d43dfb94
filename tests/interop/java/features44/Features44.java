import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Kafka 4.x features a genuine 4.4 client uses through brokers on a kraftnode quorum
 *  (tests/interop/test_kafka44_brokers_on_kraftnode.py). One line of output per event:
 *
 *  share BOOTSTRAP GROUP TOPIC EXPECTED TIMEOUT_MS
 *      a KafkaShareConsumer (explicit acknowledgement): the first record it gets is RELEASEd
 *      once (so it comes back with a higher delivery count), every other delivery ACCEPTed;
 *      commitSync after each poll. Prints "record P OFFSET VALUE DELIVERY_COUNT ACK" and
 *      "commit N FAILED" per poll, "done ACCEPTED" once EXPECTED distinct values were accepted.
 *  txn BOOTSTRAP TRANSACTIONAL_ID TOPIC
 *      three transactions of five records: committed (c0-c4), aborted (a0-a4), committed
 *      (c5-c9); prints "committed VALUE" / "aborted VALUE" and "done".
 *  read BOOTSTRAP TOPIC ISOLATION TIMEOUT_MS
 *      every partition from its start to its end offset (as the isolation level sees it);
 *      prints "value P OFFSET VALUE" and "done N". */
public class Features44 {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "share": share(args[1], args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5])); break;
            case "txn": txn(args[1], args[2], args[3]); break;
            case "read": read(args[1], args[2], args[3], Long.parseLong(args[4])); break;
            default: throw new IllegalArgumentException(args[0]);
        }
    }

    static void share(String bootstrap, String group, String topic, int expected, long timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        TreeSet<String> accepted = new TreeSet<>();
        boolean released = false;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (accepted.size() < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                for (ConsumerRecord<String, String> r : records) {
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (!released) {
                        ack = AcknowledgeType.RELEASE;
                        released = true;
                    } else {
                        accepted.add(r.value());
                    }
                    c.acknowledge(r, ack);
                    System.out.println("record " + r.partition() + " " + r.offset() + " " + r.value() + " "
                        + r.deliveryCount().orElse((short) -1) + " " + ack);
                }
                Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync(Duration.ofSeconds(30));
                long failed = result.values().stream().filter(Optional::isPresent).count();
                System.out.println("commit " + result.size() + " " + failed);
                System.out.flush();
            }
        }
        System.out.println("done " + accepted.size());
    }

    static void txn(String bootstrap, String txid, String topic) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txid);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            String[][] rounds = {{"c", "0", "commit"}, {"a", "0", "abort"}, {"c", "5", "commit"}};
            for (String[] round : rounds) {
                producer.beginTransaction();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    String v = round[0] + (Integer.parseInt(round[1]) + i);
                    producer.send(new ProducerRecord<>(topic, i % 3, null, v));
                    values.add(v);
                }
                if (round[2].equals("commit")) {
                    producer.commitTransaction();
                    for (String v : values) System.out.println("committed " + v);
                } else {
                    producer.flush();
                    producer.abortTransaction();
                    for (String v : values) System.out.println("aborted " + v);
                }
                System.out.flush();
            }
        }
        System.out.println("done");
    }

    static void read(String bootstrap, String topic, String isolation, long timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int n = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo info : c.partitionsFor(topic)) parts.add(new TopicPartition(topic, info.partition()));
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = new HashMap<>(c.endOffsets(parts));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (System.currentTimeMillis() < deadline) {
                boolean caughtUp = true;
                for (TopicPartition tp : parts) caughtUp &= c.position(tp) >= end.get(tp);
                if (caughtUp) break;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println("value " + r.partition() + " " + r.offset() + " " + r.value());
                    n++;
                }
            }
        }
        System.out.println("done " + n);
    }
}
