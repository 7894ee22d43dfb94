import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** A transactional producer: initTransactions() against kraftnode, which has no transaction
 *  coordinator. Prints "failed <millis> <exception class>: <message>" or "initialized". */
public class TxnProducer {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("transactional.id", args[1]);
        p.put("max.block.ms", "30000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        long start = System.currentTimeMillis();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            System.out.println("initialized");
        } catch (Exception e) {
            System.out.println("failed " + (System.currentTimeMillis() - start) + " "
                + e.getClass().getName() + ": " + e.getMessage());
        }
    }
}
