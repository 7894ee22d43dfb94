package raftnode;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.errors.TimeoutException;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientRequest;
import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.NetworkClientUtils;
import org.apache.kafka.clients.ManualMetadataUpdater;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.feature.Features;
import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.ControllerRegistrationRequestData;
import org.apache.kafka.common.message.ControllerRegistrationResponseData;
import org.apache.kafka.common.message.DescribeClusterResponseData;
import org.apache.kafka.common.metadata.FeatureLevelRecord;
import org.apache.kafka.common.metadata.NoOpRecord;
import org.apache.kafka.common.metadata.RegisterControllerRecord;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.network.ByteBufferSend;
import org.apache.kafka.common.network.ChannelBuilder;
import org.apache.kafka.common.network.ChannelBuilders;
import org.apache.kafka.common.network.KafkaChannel;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.network.NetworkReceive;
import org.apache.kafka.common.network.NetworkSend;
import org.apache.kafka.common.network.Selectable;
import org.apache.kafka.common.network.Selector;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ControllerRegistrationRequest;
import org.apache.kafka.common.requests.ControllerRegistrationResponse;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestUtils;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.security.authenticator.CredentialCache;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.raft.Batch;
import org.apache.kafka.raft.BatchReader;
import org.apache.kafka.raft.Endpoints;
import org.apache.kafka.raft.ExpirationService;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.raft.KafkaNetworkChannel;
import org.apache.kafka.raft.KafkaRaftClient;
import org.apache.kafka.raft.KafkaRaftClientDriver;
import org.apache.kafka.raft.LeaderAndEpoch;
import org.apache.kafka.raft.MockLog;
import org.apache.kafka.raft.OffsetAndEpoch;
import org.apache.kafka.raft.QuorumConfig;
import org.apache.kafka.raft.RaftClient;
import org.apache.kafka.raft.RaftRequest;
import org.apache.kafka.raft.RaftResponse;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.fault.FaultHandler;
import org.apache.kafka.snapshot.SnapshotReader;

/**
 * One genuine Kafka 3.9 {@link KafkaRaftClient} as a KRaft voter or observer, for mixed
 * quorums with kraftnode. Built as Kafka's {@code KafkaRaftManager} builds it: outbound
 * requests through {@link KafkaNetworkChannel} over a {@link NetworkClient}
 * ({@link Selector}, {@link ManualMetadataUpdater}), the client polled by
 * {@link KafkaRaftClientDriver}, quorum state in a {@link FileQuorumStateStore}. The log is
 * raft's {@link MockLog} (in memory: this process is never killed -9 by the tests).
 *
 * <p>Inbound: as one of Kafka's SocketServer processors: an acceptor hands connections to a
 * Kafka {@link Selector} built with {@link ChannelBuilders#serverChannelBuilder} for the
 * listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: Kafka's own TLS
 * and SASL server authenticators), and each connection is served one request at a time
 * (Kafka mutes a channel while its request is in flight): the header and body are parsed
 * with Kafka's own classes, raft requests go to {@code client.handle(...)} as a
 * {@link RaftRequest.Inbound}, and the response is sent with its response header.
 * ApiVersions is answered as a Kafka 3.9 controller's SimpleApiVersionManager answers it.
 *
 * <p>Security: {@code listener.security.protocol.map} and Kafka's {@code ssl.*},
 * {@code sasl.*} and {@code listener.name.<l>.*} keys are read by Kafka's own config
 * definitions ({@link AbstractKafkaConfig#CONFIG_DEF}, what KafkaConfig extends); outbound
 * raft and registration traffic uses {@link ChannelBuilders#clientChannelBuilder} with
 * {@code sasl.mechanism.controller.protocol} and the listener's JAAS login, as
 * KafkaRaftManager does.
 *
 * <p>Arguments are {@code key=value} with Kafka's config names: node.id, directory.id,
 * listeners (CONTROLLER://127.0.0.1:PORT), controller.quorum.voters or
 * controller.quorum.bootstrap.servers, cluster.id, metadata.log.dir, and optionally the
 * controller.quorum.*.ms timeouts. Events are JSON lines on stdout; commands on stdin:
 * {@code append N} (N framed NoOpRecords, when leader), {@code status}, {@code resign},
 * {@code snapshot [controller=ID:PORT] [clean=false]} (createSnapshot at the next committed
 * batch's end, then MockLog.deleteBeforeSnapshot; see createSnapshot), {@code shutdown}.
 */
public final class RaftNode {
    private static final PrintStream OUT = System.out;
    private static final TopicPartition METADATA_PARTITION = new TopicPartition("__cluster_metadata", 0);
    private static final Uuid METADATA_TOPIC_ID = new Uuid(0L, 1L);

    private final Map<String, String> conf;
    private final int nodeId;
    private final String clusterId;
    private final ListenerName listenerName;
    private final InetSocketAddress listenAddress;
    private final Time time = Time.SYSTEM;
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "raft-expiration");
        t.setDaemon(true);
        return t;
    });
    private KafkaRaftClient<ApiMessageAndVersion> client;
    private KafkaRaftClientDriver<ApiMessageAndVersion> driver;
    private KafkaNetworkChannel channel;
    private ServerSocketChannel server;
    private final SecurityProtocol securityProtocol;
    private final AbstractKafkaConfig kafkaConfig;
    private Metrics metrics;
    private Selector serverSelector;
    private final ConcurrentLinkedQueue<SocketChannel> newConnections = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<NetworkSend> responses = new ConcurrentLinkedQueue<>();
    private final AtomicLong connectionIds = new AtomicLong();
    private MockLog log;
    // "snapshot" command: taken by the listener (driver thread) at the next committed batch
    private volatile Map<String, String> snapshotRequest = null;

    // What handleCommit has seen (the listener runs on the driver thread).
    private volatile long committedOffset = -1;   // last committed offset delivered
    private volatile long committedRecords = 0;   // data records delivered
    private volatile long noOpRecords = 0;
    private final Map<String, Short> finalizedFeatures = new ConcurrentHashMap<>();
    private volatile long finalizedEpoch = -1;
    private final Map<Integer, RegisterControllerRecord> registrations = new ConcurrentHashMap<>();

    private RaftNode(Map<String, String> conf) {
        this.conf = conf;
        this.nodeId = Integer.parseInt(require("node.id"));
        this.clusterId = require("cluster.id");
        String listener = require("listeners");  // NAME://host:port
        int sep = listener.indexOf("://");
        this.listenerName = new ListenerName(listener.substring(0, sep));
        String hostPort = listener.substring(sep + 3);
        int colon = hostPort.lastIndexOf(':');
        this.listenAddress = new InetSocketAddress(hostPort.substring(0, colon),
                                                   Integer.parseInt(hostPort.substring(colon + 1)));
        this.securityProtocol = securityProtocolOf(listenerName, conf.get("listener.security.protocol.map"));
        // Kafka's own definitions parse the security keys (types, defaults, listener prefixes)
        Map<String, String> security = new HashMap<>();
        for (Map.Entry<String, String> e : conf.entrySet()) {
            String k = e.getKey();
            if (k.startsWith("ssl.") || k.startsWith("sasl.") || k.startsWith("listener.")
                || k.startsWith("connections.max.") || k.equals("principal.builder.class")) {
                security.put(k, e.getValue());
            }
        }
        this.kafkaConfig = new AbstractKafkaConfig(AbstractKafkaConfig.CONFIG_DEF, security,
                                                   Collections.emptyMap(), false) { };
    }

    /** As KafkaConfig.effectiveListenerSecurityProtocolMap for a controller listener. */
    private static SecurityProtocol securityProtocolOf(ListenerName listener, String map) {
        if (map == null || map.trim().isEmpty()) {
            for (SecurityProtocol p : SecurityProtocol.values()) {
                if (p.name.equals(listener.value())) return p;
            }
            return SecurityProtocol.PLAINTEXT;
        }
        for (String entry : split(map)) {
            int c = entry.indexOf(':');
            if (c > 0 && entry.substring(0, c).trim().equals(listener.value())) {
                return SecurityProtocol.forName(entry.substring(c + 1).trim());
            }
        }
        throw new IllegalArgumentException("No security protocol defined for listener " + listener.value());
    }

    private String require(String key) {
        String v = conf.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing argument " + key + "=...");
        }
        return v;
    }

    private int intConf(String key, int dflt) {
        String v = conf.get(key);
        return v == null ? dflt : Integer.parseInt(v);
    }

    private static synchronized void emit(Map<String, Object> event) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Object> e : event.entrySet()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('"').append(e.getKey()).append("\":");
            json(sb, e.getValue());
        }
        OUT.println(sb.append('}'));
        OUT.flush();
    }

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                sb.append('"').append(e.getKey()).append("\":");
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object o : (List<?>) v) {
                if (!first) sb.append(',');
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            sb.append('"').append(v.toString().replace("\\", "\\\\").replace("\"", "\\\"")
                                   .replace("\n", "\\n")).append('"');
        }
    }

    private static Map<String, Object> event(String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", name);
        return m;
    }

    // ------------------------------------------------------------------ construction

    /** Kafka's TimingWheelExpirationService, on a scheduled executor. */
    private final class TimerExpirationService implements ExpirationService {
        @Override
        public <T> CompletableFuture<T> failAfter(long timeoutMs) {
            CompletableFuture<T> f = new CompletableFuture<>();
            timer.schedule(() -> f.completeExceptionally(
                new TimeoutException("Future failed to be completed before timeout of " + timeoutMs + " ms was reached")),
                timeoutMs, TimeUnit.MILLISECONDS);
            return f;
        }
    }

    /** As KafkaRaftManager.buildNetworkClient: the controller listener's security protocol,
     * the server JAAS context of the listener and sasl.mechanism.controller.protocol. */
    private NetworkClient buildNetworkClient(LogContext logContext, QuorumConfig quorumConfig, String group,
                                             String clientId) {
        ChannelBuilder channelBuilder = ChannelBuilders.clientChannelBuilder(securityProtocol, JaasContext.Type.SERVER,
            kafkaConfig, listenerName, conf.getOrDefault("sasl.mechanism.controller.protocol", "GSSAPI"), time, true,
            logContext);
        Selector selector = new Selector(NetworkReceive.UNLIMITED, 600_000L, metrics, time, group,
            Collections.emptyMap(), false, channelBuilder, logContext);
        return new NetworkClient(selector, new ManualMetadataUpdater(), clientId,
            1, 50, 500, Selectable.USE_DEFAULT_BUFFER_SIZE, Selectable.USE_DEFAULT_BUFFER_SIZE,
            quorumConfig.requestTimeoutMs(), 10_000L, 30_000L, time, true, new ApiVersions(),
            logContext, MetadataRecoveryStrategy.NONE);
    }

    private void start() throws Exception {
        LogContext logContext = new LogContext("[RaftNode id=" + nodeId + "] ");
        metrics = new Metrics(time);
        QuorumConfig quorumConfig = new QuorumConfig(
            intConf("controller.quorum.request.timeout.ms", QuorumConfig.DEFAULT_QUORUM_REQUEST_TIMEOUT_MS),
            intConf("controller.quorum.retry.backoff.ms", QuorumConfig.DEFAULT_QUORUM_RETRY_BACKOFF_MS),
            intConf("controller.quorum.election.timeout.ms", QuorumConfig.DEFAULT_QUORUM_ELECTION_TIMEOUT_MS),
            intConf("controller.quorum.election.backoff.max.ms", QuorumConfig.DEFAULT_QUORUM_ELECTION_BACKOFF_MAX_MS),
            intConf("controller.quorum.fetch.timeout.ms", QuorumConfig.DEFAULT_QUORUM_FETCH_TIMEOUT_MS),
            intConf("controller.quorum.append.linger.ms", QuorumConfig.DEFAULT_QUORUM_LINGER_MS));

        List<String> voterStrings = split(conf.getOrDefault("controller.quorum.voters", ""));
        List<String> bootstrapStrings = split(conf.getOrDefault("controller.quorum.bootstrap.servers", ""));
        Map<Integer, InetSocketAddress> voters = QuorumConfig.parseVoterConnections(voterStrings);
        List<InetSocketAddress> bootstrap = QuorumConfig.parseBootstrapServers(bootstrapStrings);
        Uuid directoryId = Uuid.fromString(require("directory.id"));

        File logDir = new File(require("metadata.log.dir"), "__cluster_metadata-0");
        if (!logDir.mkdirs() && !logDir.isDirectory()) {
            throw new IOException("cannot create " + logDir);
        }
        log = new MockLog(METADATA_PARTITION, METADATA_TOPIC_ID, logContext);

        channel = new KafkaNetworkChannel(time, listenerName,
            buildNetworkClient(logContext, quorumConfig, "raft-channel", "raft-client-" + nodeId),
            quorumConfig.requestTimeoutMs(), "raft-" + nodeId);
        Endpoints localListeners = Endpoints.fromInetSocketAddresses(Collections.singletonMap(listenerName, listenAddress));
        client = new KafkaRaftClient<>(OptionalInt.of(nodeId), directoryId, MetadataRecordSerde.INSTANCE, channel, log,
            time, new TimerExpirationService(), logContext, true, clusterId, bootstrap, localListeners,
            org.apache.kafka.server.common.Features.KRAFT_VERSION.supportedVersionRange(), quorumConfig);
        client.register(new Listener());
        client.initialize(voters, new FileQuorumStateStore(new File(logDir, FileQuorumStateStore.DEFAULT_FILE_NAME)),
            metrics);

        // As SocketServer's processors: Kafka's server-side channel builder and Selector
        ChannelBuilder serverChannels = ChannelBuilders.serverChannelBuilder(listenerName, false, securityProtocol,
            kafkaConfig, new CredentialCache(), null, time, logContext, v -> apiVersions(v));
        serverSelector = new Selector(NetworkReceive.UNLIMITED, 600_000L, 100, metrics, time, "socket-server",
            Collections.emptyMap(), false, true, serverChannels,
            org.apache.kafka.common.memory.MemoryPool.NONE, logContext);
        server = ServerSocketChannel.open();
        server.socket().setReuseAddress(true);
        server.bind(listenAddress);
        registrationClient = buildNetworkClient(logContext, quorumConfig, "registration-channel",
            "controller-" + nodeId + "-registration");
        channel.start();
        FaultHandler faults = (msg, cause) -> {
            Map<String, Object> e = event("fault");
            e.put("message", msg);
            e.put("cause", String.valueOf(cause));
            emit(e);
            return new RuntimeException(msg, cause);
        };
        driver = new KafkaRaftClientDriver<>(client, "raft-" + nodeId, faults, logContext);
        driver.start();

        Thread registration = new Thread(this::registrationLoop, "controller-registration");
        registration.setDaemon(true);
        registration.start();

        Thread acceptor = new Thread(this::acceptLoop, "raft-acceptor");
        acceptor.setDaemon(true);
        acceptor.start();
        Thread processor = new Thread(this::processorLoop, "raft-processor");
        processor.setDaemon(true);
        processor.start();

        Map<String, Object> e = event("started");
        e.put("node_id", nodeId);
        e.put("directory_id", directoryId.toString());
        e.put("port", server.socket().getLocalPort());
        e.put("security_protocol", securityProtocol.name);
        emit(e);
    }

    private static List<String> split(String s) {
        List<String> out = new ArrayList<>();
        for (String p : s.split(",")) {
            if (!p.trim().isEmpty()) out.add(p.trim());
        }
        return out;
    }

    // ------------------------------------------------------------------ listener

    private final class Listener implements RaftClient.Listener<ApiMessageAndVersion> {
        @Override
        public void handleCommit(BatchReader<ApiMessageAndVersion> reader) {
            try {
                while (reader.hasNext()) {
                    Batch<ApiMessageAndVersion> batch = reader.next();
                    List<String> types = new ArrayList<>();
                    for (ApiMessageAndVersion r : batch.records()) {
                        ApiMessage m = r.message();
                        types.add(m.getClass().getSimpleName());
                        committedRecords++;
                        if (m instanceof NoOpRecord) {
                            noOpRecords++;
                        } else if (m instanceof FeatureLevelRecord) {
                            FeatureLevelRecord f = (FeatureLevelRecord) m;
                            if (f.featureLevel() == 0) finalizedFeatures.remove(f.name());
                            else finalizedFeatures.put(f.name(), f.featureLevel());
                            finalizedEpoch = batch.lastOffset();
                        } else if (m instanceof RegisterControllerRecord) {
                            RegisterControllerRecord rc = (RegisterControllerRecord) m;
                            registrations.put(rc.controllerId(), rc);
                        }
                    }
                    committedOffset = batch.lastOffset();
                    Map<String, Object> e = event("commit");
                    e.put("base_offset", batch.baseOffset());
                    e.put("last_offset", batch.lastOffset());
                    e.put("epoch", batch.epoch());
                    e.put("records", types);
                    e.put("control", batch.controlRecords().size());
                    emit(e);
                    Map<String, String> req = snapshotRequest;
                    if (req != null && !reader.hasNext()) {
                        snapshotRequest = null;
                        createSnapshot(new OffsetAndEpoch(batch.lastOffset() + 1, batch.epoch()),
                                       batch.appendTimestamp(), req);
                    }
                }
            } finally {
                reader.close();
            }
        }

        @Override
        public void handleLoadSnapshot(SnapshotReader<ApiMessageAndVersion> reader) {
            try {
                long records = 0;
                long noops = 0;
                while (reader.hasNext()) {
                    for (ApiMessageAndVersion r : reader.next().records()) {
                        records++;
                        if (r.message() instanceof NoOpRecord) noops++;
                    }
                }
                noOpRecords = noops;
                committedRecords = records;
                Map<String, Object> e = event("snapshot");
                e.put("records", records);
                e.put("noop_records", noops);
                e.put("offset", reader.snapshotId().offset());
                e.put("epoch", reader.snapshotId().epoch());
                committedOffset = reader.lastContainedLogOffset();
                emit(e);
            } finally {
                reader.close();
            }
        }

        @Override
        public void handleLeaderChange(LeaderAndEpoch leader) {
            Map<String, Object> e = event("leader");
            e.put("leader", leader.leaderId().isPresent() ? leader.leaderId().getAsInt() : -1);
            e.put("epoch", leader.epoch());
            emit(e);
        }
    }

    // ------------------------------------------------------------------ snapshots

    /**
     * On the driver thread (from handleCommit): {@link RaftClient#createSnapshot} at the end of
     * a committed batch, holding this node's state as metadata records (the finalized features,
     * the controller registrations it replayed, and an extra RegisterControllerRecord for
     * {@code controller=ID:PORT} if asked, so a reader can tell it loaded this snapshot), frozen;
     * then the genuine {@link MockLog#deleteBeforeSnapshot} drops the log below it (what
     * KafkaMetadataLog's retention does; MockLog.maybeClean never deletes). Emits
     * {@code snapshot_created} with the id, the log start offset and the snapshot's bytes.
     */
    private void createSnapshot(OffsetAndEpoch id, long lastContainedLogTimestamp, Map<String, String> req) {
        Map<String, Object> e = event("snapshot_created");
        try {
            Optional<org.apache.kafka.snapshot.SnapshotWriter<ApiMessageAndVersion>> w =
                client.createSnapshot(id, lastContainedLogTimestamp);
            if (!w.isPresent()) {
                e.put("error", "createSnapshot returned nothing for " + id);
                emit(e);
                return;
            }
            List<ApiMessageAndVersion> records = new ArrayList<>();
            for (Map.Entry<String, Short> f : new TreeMap<>(finalizedFeatures).entrySet()) {
                records.add(new ApiMessageAndVersion(new FeatureLevelRecord().setName(f.getKey())
                    .setFeatureLevel(f.getValue()), (short) 0));
            }
            for (RegisterControllerRecord rc : new TreeMap<>(registrations).values()) {
                records.add(new ApiMessageAndVersion(rc.duplicate(), (short) 0));
            }
            String extra = req.get("controller");
            if (extra != null) {
                String[] idPort = extra.split(":");
                RegisterControllerRecord.ControllerEndpointCollection eps =
                    new RegisterControllerRecord.ControllerEndpointCollection();
                eps.add(new RegisterControllerRecord.ControllerEndpoint().setName(listenerName.value())
                    .setHost("127.0.0.1").setPort(Integer.parseInt(idPort[1]))
                    .setSecurityProtocol(org.apache.kafka.common.security.auth.SecurityProtocol.PLAINTEXT.id));
                records.add(new ApiMessageAndVersion(new RegisterControllerRecord()
                    .setControllerId(Integer.parseInt(idPort[0])).setIncarnationId(Uuid.randomUuid())
                    .setZkMigrationReady(false).setEndPoints(eps), (short) 0));
            }
            try (org.apache.kafka.snapshot.SnapshotWriter<ApiMessageAndVersion> writer = w.get()) {
                writer.append(records);
                writer.freeze();
            }
            boolean deleted = "true".equals(req.getOrDefault("clean", "true")) && log.deleteBeforeSnapshot(id);
            org.apache.kafka.snapshot.RawSnapshotReader raw = log.readSnapshot(id).get();
            org.apache.kafka.common.record.Records recs = raw.records();
            ByteBuffer buf = ((org.apache.kafka.common.record.MemoryRecords) recs).buffer().duplicate();
            byte[] bytes = new byte[buf.remaining()];
            buf.get(bytes);
            e.put("offset", id.offset());
            e.put("epoch", id.epoch());
            e.put("last_contained_log_timestamp", lastContainedLogTimestamp);
            e.put("records", records.size());
            e.put("deleted_before", deleted);
            e.put("log_start_offset", log.startOffset());
            e.put("size", bytes.length);
            e.put("bytes", java.util.Base64.getEncoder().encodeToString(bytes));
        } catch (Exception ex) {
            e.put("error", String.valueOf(ex));
        }
        emit(e);
    }

    // ------------------------------------------------------------------ registration

    private final Uuid incarnationId = Uuid.randomUuid();
    private NetworkClient registrationClient;  // used by the registration thread only

    /**
     * As Kafka's ControllerRegistrationManager (KIP-919): once the committed metadata.version
     * supports it, register this controller (ControllerRegistration, built with Kafka's own
     * request classes) with the active controller, until a RegisterControllerRecord with our
     * incarnation id is committed. Only another node can write it: this harness is a raft
     * client, not a QuorumController, so while it leads it does not register itself.
     */
    private void registrationLoop() {
        long backoffMs = 100;
        while (true) {
            try {
                Thread.sleep(backoffMs);
                RegisterControllerRecord mine = registrations.get(nodeId);
                if (mine != null && mine.incarnationId().equals(incarnationId)) {
                    backoffMs = 1000;
                    continue;
                }
                Short mv = finalizedFeatures.get(MetadataVersion.FEATURE_NAME);
                LeaderAndEpoch le = client.leaderAndEpoch();
                if (mv == null || !MetadataVersion.fromFeatureLevel(mv).isControllerRegistrationSupported()
                    || !le.leaderId().isPresent() || le.leaderId().getAsInt() == nodeId) {
                    backoffMs = 100;
                    continue;
                }
                Optional<Node> leader = client.voterNode(le.leaderId().getAsInt(), listenerName);
                if (!leader.isPresent()) {
                    backoffMs = 100;
                    continue;
                }
                ControllerRegistrationRequestData.FeatureCollection features =
                    new ControllerRegistrationRequestData.FeatureCollection();
                features.add(new ControllerRegistrationRequestData.Feature().setName(MetadataVersion.FEATURE_NAME)
                    .setMinSupportedVersion(MetadataVersion.MINIMUM_KRAFT_VERSION.featureLevel())
                    .setMaxSupportedVersion(MetadataVersion.latestProduction().featureLevel()));
                for (org.apache.kafka.server.common.Features f : org.apache.kafka.server.common.Features.PRODUCTION_FEATURES) {
                    if (f.latestProduction() > 0) {
                        features.add(new ControllerRegistrationRequestData.Feature().setName(f.featureName())
                            .setMinSupportedVersion(f.minimumProduction()).setMaxSupportedVersion(f.latestProduction()));
                    }
                }
                ControllerRegistrationRequestData.ListenerCollection listeners =
                    new ControllerRegistrationRequestData.ListenerCollection();
                listeners.add(new ControllerRegistrationRequestData.Listener().setName(listenerName.value())
                    .setHost(listenAddress.getHostString()).setPort(server.socket().getLocalPort())
                    .setSecurityProtocol(securityProtocol.id));
                ControllerRegistrationRequestData data = new ControllerRegistrationRequestData()
                    .setControllerId(nodeId).setIncarnationId(incarnationId).setZkMigrationReady(false)
                    .setListeners(listeners).setFeatures(features);
                // As NodeToControllerChannelManager: Kafka's NetworkClient over the listener's protocol
                Node node = leader.get();
                if (!NetworkClientUtils.awaitReady(registrationClient, node, time, 10_000)) {
                    throw new IOException("controller " + node + " not ready");
                }
                ClientRequest request = registrationClient.newClientRequest(node.idString(),
                    new ControllerRegistrationRequest.Builder(data), time.milliseconds(), true);
                ClientResponse clientResponse = NetworkClientUtils.sendAndReceive(registrationClient, request, time);
                if (clientResponse.versionMismatch() != null) throw clientResponse.versionMismatch();
                if (clientResponse.responseBody() == null) throw new IOException("no response from " + node);
                ControllerRegistrationResponse response = (ControllerRegistrationResponse) clientResponse.responseBody();
                Map<String, Object> e = event("registration");
                e.put("active_controller", le.leaderId().getAsInt());
                e.put("error", Errors.forCode(response.data().errorCode()).name());
                e.put("message", response.data().errorMessage());
                emit(e);
                backoffMs = response.data().errorCode() == 0 ? 1000 : Math.min(backoffMs * 2, 5000);
            } catch (InterruptedException ie) {
                return;
            } catch (Exception ex) {
                Map<String, Object> e = event("registration");
                e.put("error", String.valueOf(ex));
                emit(e);
                backoffMs = Math.min(backoffMs * 2, 5000);
            }
        }
    }

    // ------------------------------------------------------------------ inbound requests

    private void acceptLoop() {
        while (server.isOpen()) {
            try {
                SocketChannel s = server.accept();
                s.configureBlocking(false);
                s.socket().setTcpNoDelay(true);
                newConnections.add(s);
                serverSelector.wakeup();
            } catch (IOException e) {
                return;
            }
        }
    }

    /** One SocketServer processor: register accepted connections, send finished responses,
     * poll; a channel is muted from the moment its request arrives until its response is
     * sent. The first request on each connection reports the authenticated principal. */
    private void processorLoop() {
        java.util.Set<String> reported = new java.util.HashSet<>();
        while (server.isOpen()) {
            try {
                SocketChannel sc;
                while ((sc = newConnections.poll()) != null) {
                    serverSelector.register("conn-" + connectionIds.incrementAndGet(), sc);
                }
                NetworkSend send;
                while ((send = responses.poll()) != null) {
                    if (serverSelector.channel(send.destinationId()) != null) serverSelector.send(send);
                }
                serverSelector.poll(300);
                for (NetworkReceive receive : serverSelector.completedReceives()) {
                    String id = receive.source();
                    serverSelector.mute(id);
                    KafkaChannel ch = serverSelector.channel(id);
                    try {
                        ByteBuffer buf = receive.payload();
                        RequestHeader header = RequestHeader.parse(buf);
                        if (ch != null && reported.add(id)) {
                            Map<String, Object> ev = event("inbound");
                            ev.put("principal", String.valueOf(ch.principal()));
                            ev.put("security_protocol", securityProtocol.name);
                            ev.put("api", header.apiKey().name);
                            ev.put("client_id", header.clientId());
                            emit(ev);
                        }
                        respond(id, header, buf);
                    } catch (Exception e) {
                        Map<String, Object> ev = event("connection_error");
                        ev.put("error", String.valueOf(e));
                        emit(ev);
                        serverSelector.close(id);
                    }
                }
                for (NetworkSend done : serverSelector.completedSends()) {
                    if (serverSelector.channel(done.destinationId()) != null) serverSelector.unmute(done.destinationId());
                }
                for (String gone : serverSelector.disconnected().keySet()) {
                    reported.remove(gone);
                }
            } catch (Exception e) {
                if (!server.isOpen()) return;
                Map<String, Object> ev = event("connection_error");
                ev.put("error", String.valueOf(e));
                emit(ev);
            }
        }
    }

    private void reply(String connectionId, ByteBuffer response) {
        responses.add(new NetworkSend(connectionId, ByteBufferSend.sizePrefixed(response)));
        serverSelector.wakeup();
    }

    private void respond(String connectionId, RequestHeader header, ByteBuffer body) throws Exception {
        ApiKeys api = header.apiKey();
        short version = header.apiVersion();
        ResponseHeader responseHeader = header.toResponseHeader();
        if (api == ApiKeys.API_VERSIONS) {
            ApiVersionsResponse r = apiVersionsResponse(header, body);
            short v = r.data().errorCode() == Errors.UNSUPPORTED_VERSION.code() ? 0 : version;
            reply(connectionId, RequestUtils.serialize(responseHeader.data(), responseHeader.headerVersion(), r.data(), v));
            return;
        }
        if (api == ApiKeys.VOTE) {
            // which Vote versions reach a 3.9 voter (a Vote v2 pre-vote would fail to parse below
            // and close the connection, as Kafka's RequestContext does)
            Map<String, Object> ev = event("vote_request");
            ev.put("version", (int) version);
            ev.put("supported", api.isVersionSupported(version));
            ev.put("client_id", header.clientId());
            emit(ev);
        }
        AbstractRequest request = AbstractRequest.parseRequest(api, version, body).request;
        if (api != ApiKeys.FETCH && api != ApiKeys.VOTE && api != ApiKeys.BEGIN_QUORUM_EPOCH
            && api != ApiKeys.END_QUORUM_EPOCH) {
            // everything but the raft peers' own traffic is reported (who asked what)
            Map<String, Object> ev = event("request");
            ev.put("api", api.name);
            ev.put("version", (int) version);
            ev.put("client_id", header.clientId());
            emit(ev);
        }
        ApiMessage answer;
        switch (api) {
            case VOTE:
            case BEGIN_QUORUM_EPOCH:
            case END_QUORUM_EPOCH:
            case FETCH:
            case FETCH_SNAPSHOT:
            case DESCRIBE_QUORUM:
            case ADD_RAFT_VOTER:
            case REMOVE_RAFT_VOTER:
            case UPDATE_RAFT_VOTER: {
                RaftRequest.Inbound inbound = new RaftRequest.Inbound(listenerName, header.correlationId(), version,
                    request.data(), time.milliseconds());
                client.handle(inbound);
                // answered when the raft client completes it (a Fetch may wait on the driver thread)
                inbound.completion.whenComplete((out, error) -> {
                    if (error != null) {
                        serverSelector.close(connectionId);  // as Kafka: no answer, the connection closes
                        return;
                    }
                    reply(connectionId, RequestUtils.serialize(responseHeader.data(), responseHeader.headerVersion(),
                        out.data(), version));
                });
                return;
            }
            case DESCRIBE_CLUSTER:
                answer = describeCluster();
                break;
            case CONTROLLER_REGISTRATION:
                // Registrations go to Kafka's QuorumController, which this harness is not.
                answer = new ControllerRegistrationResponseData().setErrorCode(Errors.NOT_CONTROLLER.code())
                    .setErrorMessage("raftnode harness: no QuorumController");
                break;
            default:
                answer = request.getErrorResponse(0, Errors.UNSUPPORTED_VERSION.exception()).data();
        }
        reply(connectionId, RequestUtils.serialize(responseHeader.data(), responseHeader.headerVersion(), answer, version));
    }

    /** As ControllerApis.handleDescribeCluster: registered controllers on this listener. */
    private ApiMessage describeCluster() {
        DescribeClusterResponseData r = new DescribeClusterResponseData().setClusterId(clusterId)
            .setEndpointType((byte) 2);
        Short mv = finalizedFeatures.get(MetadataVersion.FEATURE_NAME);
        if (mv == null || !MetadataVersion.fromFeatureLevel(mv).isControllerRegistrationSupported()) {
            return r.setErrorCode(Errors.UNSUPPORTED_VERSION.code()).setErrorMessage(
                "Direct-to-controller communication is not supported with the current MetadataVersion.");
        }
        LeaderAndEpoch le = client.leaderAndEpoch();
        r.setControllerId(le.leaderId().orElse(-1));
        for (RegisterControllerRecord rc : new TreeMap<>(registrations).values()) {
            RegisterControllerRecord.ControllerEndpoint ep = rc.endPoints().find(listenerName.value());
            if (ep != null) {
                r.brokers().add(new DescribeClusterResponseData.DescribeClusterBroker()
                    .setBrokerId(rc.controllerId()).setHost(ep.host()).setPort(ep.port()).setRack(null));
            }
        }
        return r;
    }

    /** As a Kafka 3.9 controller's SimpleApiVersionManager (ListenerType.CONTROLLER). */
    private ApiVersionsResponse apiVersionsResponse(RequestHeader header, ByteBuffer body) {
        if (!ApiKeys.API_VERSIONS.isVersionSupported(header.apiVersion())) {
            // As Kafka's RequestContext: a v0 answer with UNSUPPORTED_VERSION and our range.
            return new ApiVersionsRequest(new org.apache.kafka.common.message.ApiVersionsRequestData(), (short) 0)
                .getErrorResponse(0, Errors.UNSUPPORTED_VERSION.exception());
        }
        ApiVersionsRequest request = (ApiVersionsRequest) AbstractRequest.parseRequest(
            ApiKeys.API_VERSIONS, header.apiVersion(), body).request;
        if (!request.isValid()) {
            return request.getErrorResponse(0, Errors.INVALID_REQUEST.exception());
        }
        return apiVersions(header.apiVersion());
    }

    /** The answer for a valid ApiVersions request of this version (also what the SASL
     * server authenticator sends before authentication, through the channel builder). */
    private ApiVersionsResponse apiVersions(short requestVersion) {
        Map<String, SupportedVersionRange> supported = new HashMap<>();
        supported.put(MetadataVersion.FEATURE_NAME, new SupportedVersionRange(
            MetadataVersion.MINIMUM_KRAFT_VERSION.featureLevel(), MetadataVersion.latestProduction().featureLevel()));
        for (org.apache.kafka.server.common.Features f : org.apache.kafka.server.common.Features.PRODUCTION_FEATURES) {
            if (f.latestProduction() > 0) {
                supported.put(f.featureName(), new SupportedVersionRange(f.minimumProduction(), f.latestProduction()));
            }
        }
        return new ApiVersionsResponse.Builder()
            .setThrottleTimeMs(0)
            .setApiVersions(ApiVersionsResponse.collectApis(ApiKeys.apisForListener(ApiMessageType.ListenerType.CONTROLLER), false))
            .setSupportedFeatures(Features.supportedFeatures(supported))
            .setFinalizedFeatures(new HashMap<>(finalizedFeatures))
            .setFinalizedFeaturesEpoch(finalizedEpoch)
            .setZkMigrationEnabled(false)
            .setAlterFeatureLevel0(requestVersion < 4)  // as ControllerApis.handleApiVersionsRequest
            .build();
    }

    // ------------------------------------------------------------------ commands

    private Map<String, Object> status() {
        Map<String, Object> e = event("status");
        LeaderAndEpoch le = client.leaderAndEpoch();
        e.put("leader", le.leaderId().isPresent() ? le.leaderId().getAsInt() : -1);
        e.put("epoch", le.epoch());
        OptionalLong hw = client.highWatermark();
        e.put("high_watermark", hw.isPresent() ? hw.getAsLong() : -1);
        e.put("log_end_offset", client.logEndOffset());
        e.put("committed_offset", committedOffset);
        e.put("committed_records", committedRecords);
        e.put("noop_records", noOpRecords);
        e.put("kraft_version", (int) client.kraftVersion().featureLevel());
        e.put("running", client.isRunning());
        return e;
    }

    private void commandLoop() throws Exception {
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            try {
                switch (words[0]) {
                    case "status":
                        emit(status());
                        break;
                    case "append": {
                        int n = Integer.parseInt(words[1]);
                        LeaderAndEpoch le = client.leaderAndEpoch();
                        Map<String, Object> e = event("appended");
                        if (!le.isLeader(nodeId)) {
                            e.put("error", "NOT_LEADER");
                            e.put("leader", le.leaderId().orElse(-1));
                        } else {
                            List<ApiMessageAndVersion> records = new ArrayList<>();
                            for (int i = 0; i < n; i++) {
                                records.add(new ApiMessageAndVersion(new NoOpRecord(), (short) 0));
                            }
                            long last = client.prepareAppend(le.epoch(), records);
                            client.schedulePreparedAppend();
                            e.put("last_offset", last);
                            e.put("epoch", le.epoch());
                        }
                        emit(e);
                        break;
                    }
                    case "snapshot": {
                        // snapshot [key=value ...]: taken at the end of the next committed batch
                        Map<String, String> req = new HashMap<>();
                        for (int i = 1; i < words.length; i++) {
                            int eq = words[i].indexOf('=');
                            req.put(words[i].substring(0, eq), words[i].substring(eq + 1));
                        }
                        snapshotRequest = req;
                        emit(event("snapshot_requested"));
                        break;
                    }
                    case "resign": {
                        LeaderAndEpoch le = client.leaderAndEpoch();
                        Map<String, Object> e = event("resigned");
                        if (le.isLeader(nodeId)) {
                            client.resign(le.epoch());
                            e.put("epoch", le.epoch());
                        } else {
                            e.put("error", "NOT_LEADER");
                        }
                        emit(e);
                        break;
                    }
                    case "shutdown":
                        shutdown();
                        return;
                    default:
                        Map<String, Object> e = event("error");
                        e.put("error", "unknown command " + words[0]);
                        emit(e);
                }
            } catch (Exception ex) {
                Map<String, Object> e = event("error");
                e.put("command", line);
                e.put("error", String.valueOf(ex));
                emit(e);
            }
        }
        shutdown();
    }

    /** Graceful: the client resigns (EndQuorumEpoch) if it leads, then the process exits. */
    private void shutdown() {
        try {
            client.shutdown(1000).get(3, TimeUnit.SECONDS);
        } catch (Exception e) {
            Map<String, Object> ev = event("error");
            ev.put("error", "shutdown: " + e);
            emit(ev);
        }
        try {
            server.close();
            serverSelector.wakeup();
        } catch (IOException ignored) {
            // exiting anyway
        }
        emit(event("shutdown"));
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> conf = new HashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            if (eq <= 0) {
                System.err.println("usage: RaftNode key=value ...; bad argument: " + a);
                System.exit(2);
            }
            conf.put(a.substring(0, eq), a.substring(eq + 1));
        }
        RaftNode node = new RaftNode(conf);
        node.start();
        node.commandLoop();
    }
}
