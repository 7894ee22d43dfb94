import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka 4.x's clients for the KIP-848 must-show of issue 36; one JSON line on stdout.
 *
 *   produce BOOT TOPIC PREFIX N
 *       KafkaProducer, acks=all: PREFIX-0 .. PREFIX-(N-1), every send waited for -> {"sent": N}
 *   consume BOOT GROUP topic|regex NAME PREFIX WANT TIMEOUT_MS [PROTOCOL]
 *       KafkaConsumer with group.protocol=PROTOCOL (consumer unless given), subscribe(List.of(NAME)) or
 *       subscribe(new SubscriptionPattern(NAME)) (the broker-side RE2/J regex of KIP-848);
 *       polls until WANT values starting with PREFIX arrived (then 2 s more, to see any extra)
 *       or TIMEOUT_MS passed; commitSync() when it read any; close() (the member leaves).
 *       -> {"values": [...], "assignment": ["topic-0", ...], "memberId": ..., "generation": ...}
 */
public class Kip848 {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) produce(args); else consume(args);
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String array(Iterable<String> xs) {
        List<String> q = new ArrayList<>();
        for (String x : xs) q.add(quote(x));
        return "[" + String.join(",", q) + "]";
    }

    static void produce(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        int n = Integer.parseInt(a[4]);
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) sent.add(pr.send(new ProducerRecord<>(a[2], a[3] + "-" + i)));
            for (java.util.concurrent.Future<?> f : sent) f.get(60, TimeUnit.SECONDS);
        }
        System.out.println("{\"sent\": " + n + "}");
    }

    static void consume(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        p.put("group.id", a[2]);
        p.put("group.protocol", a.length > 8 ? a[8] : "consumer");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        String prefix = a[5];
        int want = Integer.parseInt(a[6]);
        long deadline = System.currentTimeMillis() + Long.parseLong(a[7]);
        List<String> values = new ArrayList<>();
        TreeSet<String> assignment = new TreeSet<>();
        String memberId;
        int generation;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            if (a[3].equals("regex")) c.subscribe(new SubscriptionPattern(a[4]));
            else c.subscribe(List.of(a[4]));
            long settle = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, settle)) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    String v = r.value() == null ? "" : new String(r.value(), java.nio.charset.StandardCharsets.ISO_8859_1);
                    if (v.startsWith(prefix)) values.add(v);
                }
                if (settle == Long.MAX_VALUE && values.size() >= want) settle = System.currentTimeMillis() + 2000;
            }
            for (TopicPartition tp : c.assignment()) assignment.add(tp.toString());
            memberId = c.groupMetadata().memberId();
            generation = c.groupMetadata().generationId();
            if (!values.isEmpty()) c.commitSync(Duration.ofSeconds(60));
        }
        System.out.println("{\"values\": " + array(values) + ", \"assignment\": " + array(assignment)
                + ", \"memberId\": " + quote(memberId) + ", \"generation\": " + generation + "}");
    }
}
