import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.stats.Avg;
import org.apache.kafka.common.metrics.stats.Max;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.metrics.stats.WindowedSum;

/**
 * Kafka's own windowed stats (MetricConfig defaults: 2 samples of 30 s), driven from stdin:
 * "record VALUE TIME_MS" records into Avg, Max and Rate; "measure TIME_MS" prints
 * "avg max rate" as Kafka measures them. Used to check kraftnode's port of them.
 */
public class KafkaStats {
    public static void main(String[] args) throws Exception {
        MetricConfig config = new MetricConfig();
        Avg avg = new Avg();
        Max max = new Max();
        Rate rate = new Rate(TimeUnit.SECONDS, new WindowedSum());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.trim().split(" ");
            if (p[0].equals("record")) {
                double v = Double.parseDouble(p[1]);
                long t = Long.parseLong(p[2]);
                avg.record(config, v, t);
                max.record(config, v, t);
                rate.record(config, v, t);
            } else if (p[0].equals("measure")) {
                long t = Long.parseLong(p[1]);
                System.out.println(avg.measure(config, t) + " " + max.measure(config, t) + " "
                    + rate.measure(config, t));
            }
        }
        System.out.flush();
    }
}
