import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

/**
 * Runs Kafka 4.4's own PartitionChangeBuilder on cases read from stdin, one per line:
 *   replicas|isr|elr|lastKnownElr|leader|leaderRecoveryState|alive|targetIsr|minIsr|election|uncleanShutdown|mv|elrEnabled
 * (lists comma-separated, possibly empty; targetIsr "-" keeps the ISR; uncleanShutdown "-" for none;
 * election ONLINE / PREFERRED / UNCLEAN). Prints one line per case: "none", or
 *   vVERSION leader=L isr=[..]|null elr=[..]|null lastKnownElr=[..]|null lrs=S
 */
public class PartitionChanges {
    static final Uuid UNASSIGNED = new Uuid(0L, 1L);

    static int[] ints(String s) {
        if (s.isEmpty()) return new int[0];
        return Arrays.stream(s.split(",")).mapToInt(Integer::parseInt).toArray();
    }

    static List<Integer> list(String s) {
        List<Integer> out = new ArrayList<>();
        for (int x : ints(s)) out.add(x);
        return out;
    }

    static String show(List<Integer> l) {
        return l == null ? "null" : l.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\\|", -1);
            int[] replicas = ints(f[0]);
            Uuid[] dirs = new Uuid[replicas.length];
            Arrays.fill(dirs, UNASSIGNED);
            PartitionRegistration p = new PartitionRegistration.Builder()
                .setReplicas(replicas).setDirectories(dirs).setIsr(ints(f[1])).setElr(ints(f[2]))
                .setLastKnownElr(ints(f[3])).setLeader(Integer.parseInt(f[4]))
                .setLeaderRecoveryState(LeaderRecoveryState.of(Byte.parseByte(f[5])))
                .setRemovingReplicas(new int[0]).setAddingReplicas(new int[0])
                .setLeaderEpoch(5).setPartitionEpoch(9).build();
            List<Integer> alive = list(f[6]);
            PartitionChangeBuilder b = new PartitionChangeBuilder(p, new Uuid(0L, 7L), 0, alive::contains,
                MetadataVersion.fromFeatureLevel(Short.parseShort(f[11])), Integer.parseInt(f[8]),
                Boolean.parseBoolean(f[12]));
            b.setDefaultDirProvider(id -> UNASSIGNED);
            b.setElection(PartitionChangeBuilder.Election.valueOf(f[9]));
            if (!f[7].equals("-")) b.setTargetIsr(list(f[7]));
            if (!f[10].equals("-")) b.setUncleanShutdownReplicas(list(f[10]));
            Optional<ApiMessageAndVersion> r = b.build();
            if (r.isEmpty()) {
                out.append("none\n");
                continue;
            }
            PartitionChangeRecord c = (PartitionChangeRecord) r.get().message();
            out.append("v").append(r.get().version()).append(" leader=").append(c.leader())
                .append(" isr=").append(show(c.isr())).append(" elr=").append(show(c.eligibleLeaderReplicas()))
                .append(" lastKnownElr=").append(show(c.lastKnownElr()))
                .append(" lrs=").append(c.leaderRecoveryState()).append('\n');
        }
        System.out.print(out);
    }
}
