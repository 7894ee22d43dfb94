import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.security.authorizer.AclEntry;
import org.apache.kafka.raft.ReplicaKey;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * One JVM, one genuine Kafka Admin at a time, driven by commands on stdin (one per line,
 * words separated by spaces); every answer is one JSON line on stdout.
 *
 *   open controllers|servers HOST:PORT[,...] [PROPS]  Admin with bootstrap.controllers / bootstrap.servers
 *                                                 (PROPS: a file of more client configs, e.g. SASL)
 *   createacl TYPE NAME PATTERN PRINCIPAL HOST OP PERM   createAcls (one binding)
 *   describeacls                                  describeAcls(AclBindingFilter.ANY): sorted bindings
 *   deleteacls TYPE NAME PATTERN PRINCIPAL HOST OP PERM  deleteAcls (one filter; '-' = null name/
 *                                                 principal/host): the deleted bindings
 *   upgradefeature NAME LEVEL                     updateFeatures (UPGRADE)
 *   scramupsert USER MECHANISM PASSWORD ITERATIONS  alterUserScramCredentials (one upsertion)
 *   scramusers                                    describeUserScramCredentials(): sorted USER:MECHANISM:ITERATIONS
 *   quorum                                        describeMetadataQuorum
 *   cluster                                       describeCluster
 *   features                                      describeFeatures
 *   configs TYPE NAME                             describeConfigs (TYPE: topic, broker, ...)
 *   add ID DIRID LISTENER HOST PORT               addRaftVoter
 *   remove ID DIRID                               removeRaftVoter
 *   createtopic NAME                              createTopics (1 partition, 1 replica)
 *   listgroups                                    listConsumerGroups: how many
 *   groups                                        listConsumerGroups: each group's id, simple, state, type
 *   describegroup GROUP                           describeConsumerGroups: state, type, assignor,
 *                                                 coordinator, members (client id, host, assignment)
 *   clusterops                                    describeCluster, includeAuthorizedOperations
 *   topicops NAME                                 describeTopics, includeAuthorizedOperations
 *   supportedops cluster|topic                    Kafka's AclEntry.supportedOperations
 *   voterkeys ID:DIRID,...                        Kafka's text for that voter set in error messages
 *   close
 *
 * A failure answers {"error": "<exception class>", "message": "<its message>"}.
 */
public class AdminDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_S = 60;

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Admin admin = null;
        String line;
        System.out.println("{\"ready\": true}");
        System.out.flush();
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            ObjectNode out = JSON.createObjectNode();
            try {
                switch (w[0]) {
                    case "open": {
                        if (admin != null) admin.close();
                        Properties p = new Properties();
                        p.put(w[1].equals("controllers") ? AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG
                                : AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, w[2]);
                        if (w.length > 3) {
                            try (FileInputStream f = new FileInputStream(w[3])) {
                                p.load(f);
                            }
                        }
                        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
                        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
                        p.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
                        admin = Admin.create(p);
                        out.put("ok", true);
                        break;
                    }
                    case "quorum":
                        quorum(admin.describeMetadataQuorum().quorumInfo().get(WAIT_S, TimeUnit.SECONDS), out);
                        break;
                    case "cluster":
                        cluster(admin.describeCluster(), out);
                        break;
                    case "features":
                        features(admin.describeFeatures().featureMetadata().get(WAIT_S, TimeUnit.SECONDS), out);
                        break;
                    case "configs": {
                        ConfigResource r = new ConfigResource(ConfigResource.Type.valueOf(w[1].toUpperCase()),
                                w.length > 2 ? w[2] : "");
                        Map<ConfigResource, Config> got = admin.describeConfigs(Collections.singleton(r))
                                .all().get(WAIT_S, TimeUnit.SECONDS);
                        ObjectNode entries = out.putObject("configs");
                        for (ConfigEntry e : got.get(r).entries()) entries.put(e.name(), e.value());
                        break;
                    }
                    case "add": {
                        RaftVoterEndpoint ep = new RaftVoterEndpoint(w[3], w[4], Integer.parseInt(w[5]));
                        admin.addRaftVoter(Integer.parseInt(w[1]), Uuid.fromString(w[2]), Collections.singleton(ep))
                                .all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    }
                    case "remove":
                        admin.removeRaftVoter(Integer.parseInt(w[1]), Uuid.fromString(w[2]))
                                .all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    case "createtopic":
                        admin.createTopics(Collections.singleton(new NewTopic(w[1], 1, (short) 1)))
                                .all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    case "listgroups":
                        out.put("groups", admin.listConsumerGroups().all().get(WAIT_S, TimeUnit.SECONDS).size());
                        break;
                    case "groups": {
                        // state() and type(): in 3.9's and 4.x's ConsumerGroupListing alike
                        List<ConsumerGroupListing> gs = new ArrayList<>(
                                admin.listConsumerGroups().all().get(WAIT_S, TimeUnit.SECONDS));
                        gs.sort((a, b) -> a.groupId().compareTo(b.groupId()));
                        ArrayNode arr = out.putArray("groups");
                        for (ConsumerGroupListing g : gs) {
                            ObjectNode o = arr.addObject();
                            o.put("groupId", g.groupId());
                            o.put("simple", g.isSimpleConsumerGroup());
                            o.put("state", g.state().map(Enum::name).orElse(null));
                            o.put("type", g.type().map(Enum::name).orElse(null));
                        }
                        break;
                    }
                    case "describegroup": {
                        ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singleton(w[1]))
                                .all().get(WAIT_S, TimeUnit.SECONDS).get(w[1]);
                        out.put("groupId", d.groupId());
                        out.put("simple", d.isSimpleConsumerGroup());
                        out.put("state", d.state().name());
                        out.put("type", d.type().name());
                        out.put("assignor", d.partitionAssignor());
                        out.put("coordinator", d.coordinator() == null ? -1 : d.coordinator().id());
                        ArrayNode arr = out.putArray("members");
                        for (MemberDescription m : d.members()) {
                            ObjectNode o = arr.addObject();
                            o.put("clientId", m.clientId());
                            o.put("host", m.host());
                            o.put("instanceId", m.groupInstanceId().orElse(null));
                            ArrayNode tps = o.putArray("assignment");
                            m.assignment().topicPartitions().stream().map(Object::toString).sorted()
                                    .forEach(tps::add);
                        }
                        break;
                    }
                    case "clusterops": {
                        Set<AclOperation> ops = admin.describeCluster(
                                new DescribeClusterOptions().includeAuthorizedOperations(true))
                                .authorizedOperations().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ops", ops == null ? null : names(ops));
                        break;
                    }
                    case "topicops": {
                        TopicDescription d = admin.describeTopics(Collections.singleton(w[1]),
                                new DescribeTopicsOptions().includeAuthorizedOperations(true))
                                .allTopicNames().get(WAIT_S, TimeUnit.SECONDS).get(w[1]);
                        out.put("ops", d.authorizedOperations() == null ? null : names(d.authorizedOperations()));
                        break;
                    }
                    case "supportedops":
                        // what a Kafka node without an authorizer allows (AuthHelper.authorizedOperations)
                        out.put("ops", names(AclEntry.supportedOperations(ResourceType.valueOf(w[1].toUpperCase()))));
                        break;
                    case "voterkeys": {
                        // Kafka's VoterSet.voterKeys() as its error messages print it: a
                        // HashMap<Integer, VoterNode>'s keys collected into a HashSet
                        Map<Integer, ReplicaKey> byId = new HashMap<>();
                        for (String k : w[1].split(",")) {
                            String[] idDir = k.split(":");
                            byId.put(Integer.parseInt(idDir[0]),
                                    ReplicaKey.of(Integer.parseInt(idDir[0]), Uuid.fromString(idDir[1])));
                        }
                        Set<ReplicaKey> keys = new HashMap<>(byId).values().stream().collect(Collectors.toSet());
                        out.put("text", keys.toString());
                        break;
                    }
                    case "createacl":
                        admin.createAcls(Collections.singleton(binding(w))).all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    case "describeacls": {
                        ArrayNode arr = out.putArray("acls");
                        admin.describeAcls(AclBindingFilter.ANY).values().get(WAIT_S, TimeUnit.SECONDS)
                                .stream().map(AclBinding::toString).sorted().forEach(arr::add);
                        break;
                    }
                    case "deleteacls": {
                        AclBindingFilter f = new AclBindingFilter(
                                new ResourcePatternFilter(ResourceType.valueOf(w[1]), nul(w[2]),
                                        PatternType.valueOf(w[3])),
                                new AccessControlEntryFilter(nul(w[4]), nul(w[5]),
                                        AclOperation.valueOf(w[6]), AclPermissionType.valueOf(w[7])));
                        ArrayNode arr = out.putArray("deleted");
                        admin.deleteAcls(Collections.singleton(f)).all().get(WAIT_S, TimeUnit.SECONDS)
                                .stream().map(AclBinding::toString).sorted().forEach(arr::add);
                        break;
                    }
                    case "upgradefeature":
                        admin.updateFeatures(Collections.singletonMap(w[1], new FeatureUpdate(
                                Short.parseShort(w[2]), FeatureUpdate.UpgradeType.UPGRADE)),
                                new UpdateFeaturesOptions()).all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    case "scramupsert":
                        admin.alterUserScramCredentials(Collections.singletonList(new UserScramCredentialUpsertion(
                                w[1], new ScramCredentialInfo(ScramMechanism.fromMechanismName(w[2]),
                                        Integer.parseInt(w[4])), w[3]))).all().get(WAIT_S, TimeUnit.SECONDS);
                        out.put("ok", true);
                        break;
                    case "scramusers": {
                        ArrayNode arr = out.putArray("users");
                        List<String> rows = new ArrayList<>();
                        for (UserScramCredentialsDescription d : admin.describeUserScramCredentials().all()
                                .get(WAIT_S, TimeUnit.SECONDS).values()) {
                            for (ScramCredentialInfo i : d.credentialInfos())
                                rows.add(d.name() + ":" + i.mechanism().mechanismName() + ":" + i.iterations());
                        }
                        rows.stream().sorted().forEach(arr::add);
                        break;
                    }
                    case "close":
                        if (admin != null) admin.close();
                        admin = null;
                        out.put("ok", true);
                        break;
                    default:
                        out.put("error", "UnknownCommand");
                        out.put("message", line);
                }
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                out.put("error", c.getClass().getName());
                out.put("message", c.getMessage());
            } catch (Exception e) {
                out.put("error", e.getClass().getName());
                out.put("message", e.getMessage());
            }
            System.out.println(JSON.writeValueAsString(out));
            System.out.flush();
        }
        if (admin != null) admin.close();
    }

    private static String nul(String s) {
        return s.equals("-") ? null : s;
    }

    private static AclBinding binding(String[] w) {
        return new AclBinding(new ResourcePattern(ResourceType.valueOf(w[1]), w[2], PatternType.valueOf(w[3])),
                new AccessControlEntry(w[4], w[5], AclOperation.valueOf(w[6]), AclPermissionType.valueOf(w[7])));
    }

    private static String names(Set<AclOperation> ops) {
        return ops.stream().map(Enum::name).sorted().collect(Collectors.joining(","));
    }

    private static void replicas(List<QuorumInfo.ReplicaState> states, ArrayNode arr) {
        for (QuorumInfo.ReplicaState s : states) {
            ObjectNode o = arr.addObject();
            o.put("id", s.replicaId());
            o.put("directoryId", s.replicaDirectoryId().toString());
            o.put("logEndOffset", s.logEndOffset());
            OptionalLong f = s.lastFetchTimestamp();
            OptionalLong c = s.lastCaughtUpTimestamp();
            o.put("lastFetchTimestamp", f.isPresent() ? f.getAsLong() : -1);
            o.put("lastCaughtUpTimestamp", c.isPresent() ? c.getAsLong() : -1);
        }
    }

    private static void quorum(QuorumInfo q, ObjectNode out) {
        out.put("leaderId", q.leaderId());
        out.put("leaderEpoch", q.leaderEpoch());
        out.put("highWatermark", q.highWatermark());
        replicas(q.voters(), out.putArray("voters"));
        replicas(q.observers(), out.putArray("observers"));
        ObjectNode nodes = out.putObject("nodes");
        for (Map.Entry<Integer, QuorumInfo.Node> e : q.nodes().entrySet()) {
            ArrayNode eps = nodes.putArray(String.valueOf(e.getKey()));
            for (RaftVoterEndpoint ep : e.getValue().endpoints())
                eps.add(ep.name() + "://" + ep.host() + ":" + ep.port());
        }
    }

    private static void cluster(DescribeClusterResult r, ObjectNode out) throws Exception {
        out.put("clusterId", r.clusterId().get(WAIT_S, TimeUnit.SECONDS));
        Node c = r.controller().get(WAIT_S, TimeUnit.SECONDS);
        out.put("controller", c == null ? -1 : c.id());
        ArrayNode nodes = out.putArray("nodes");
        List<Node> sorted = new ArrayList<>(r.nodes().get(WAIT_S, TimeUnit.SECONDS));
        sorted.sort((a, b) -> Integer.compare(a.id(), b.id()));
        for (Node n : sorted) {
            ObjectNode o = nodes.addObject();
            o.put("id", n.id());
            o.put("host", n.host());
            o.put("port", n.port());
            o.put("rack", n.rack());
        }
    }

    private static void features(FeatureMetadata f, ObjectNode out) {
        ObjectNode fin = out.putObject("finalized");
        for (Map.Entry<String, FinalizedVersionRange> e : f.finalizedFeatures().entrySet()) {
            ArrayNode a = fin.putArray(e.getKey());
            a.add(e.getValue().minVersionLevel());
            a.add(e.getValue().maxVersionLevel());
        }
        out.put("epoch", f.finalizedFeaturesEpoch().isPresent() ? f.finalizedFeaturesEpoch().get() : -1);
        ObjectNode sup = out.putObject("supported");
        for (Map.Entry<String, SupportedVersionRange> e : f.supportedFeatures().entrySet()) {
            ArrayNode a = sup.putArray(e.getKey());
            a.add(e.getValue().minVersion());
            a.add(e.getValue().maxVersion());
        }
    }
}
