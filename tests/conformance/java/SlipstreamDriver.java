// Conformance driver: the Apache Kafka Java client (kafka-clients 3.9.1) against a broker.
//
// Usage: java -cp <build>:<jars> SlipstreamDriver BOOTSTRAP COMMAND ARGS...
//
//   admin-create TOPIC PARTITIONS         create a topic through the Admin API
//   admin-describe TOPIC                  print its partitions
//   admin-list                            print topic names
//   admin-offsets TOPIC SPEC              ListOffsets through Admin.listOffsets; SPEC is
//                                         earliest | latest | max-timestamp | <timestamp ms>
//   admin-cluster                         DescribeCluster: cluster id, nodes, controller
//   admin-set-config TOPIC KEY VALUE      IncrementalAlterConfigs SET, then DescribeConfigs
//   admin-remove-members GROUP INSTANCE_ID...
//                                         Admin.removeMembersFromConsumerGroup: one LeaveGroup
//                                         (v3+) naming static members by group.instance.id
//   produce TOPIC COUNT COMPRESSION [--base-timestamp MS]
//                                         idempotent, acks=all; keys k<i>, values v<i>,
//                                         header "i" = <i>, timestamp MS+i if given;
//                                         one "ack" line per record
//   produce-until-stopped TOPIC [--interval-ms N]
//                                         idempotent, acks=all: record i (key and value the
//                                         decimal i, from 0) every N ms (10) until SIGTERM, then
//                                         flush; one "ack" (key, partition, offset) or "nack"
//                                         (key, exception) line per record, then "done"
//   consume TOPIC COUNT [--from-beginning | --timestamp MS | --latest] [--timeout-ms N] [--isolation read_committed|read_uncommitted]
//                                         assign all partitions; one "record" line each;
//                                         prints "ready" once positions are fixed
//   txn-copy IN OUT GROUP TRANSACTIONAL_ID COUNT [--abort-first]
//                                         consume-transform-produce: a read_committed group
//                                         member copies IN to OUT ("copy-" + value), one
//                                         transaction per poll with sendOffsetsToTransaction;
//                                         --abort-first aborts the first transaction and seeks
//                                         back to the committed offsets. "committed"/"aborted"
//                                         lines per transaction; stops after COUNT copies
//   group-consume TOPIC GROUP [--assignor range|roundrobin|sticky|cooperative-sticky[,...]]
//                 [--client-id ID] [--instance-id ID] [--session-timeout-ms N]
//                 [--heartbeat-ms N] [--max-poll-interval-ms N] [--max-poll-records N]
//                 [--rebalance-trigger PATH] [--stall-assignment-file PATH --stall-assignment-ms N]
//                                         (--rebalance-trigger: when PATH appears, delete it and
//                                         call enforceRebalance with a reason; "rebalance_enforced".
//                                         --stall-assignment-file: the range assignor, as leader,
//                                         sleeps N ms in an assignment made while PATH exists,
//                                         deleting it; "assignment_stalling")
//                                         a consumer-group member (classic protocol, or KIP-848
//                                         with --group-protocol consumer, where it also seeks
//                                         newly assigned partitions to their committed offsets:
//                                         KAFKA-17674, see GroupMember) that runs
//                                         until SIGTERM: one "record" line per processed record,
//                                         commitSync after each batch and in onPartitionsRevoked;
//                                         "assigned"/"revoked"/"lost" lines from the rebalance
//                                         listener, "generation" when the generation changes,
//                                         "committed"/"commit_failed" per commit. SIGTERM: commit
//                                         what was processed, "revoked" (reason close), close()
//                                         (a static member sends no LeaveGroup), "closed", "done".
//                                         Every line carries "t": System.nanoTime() (CLOCK_MONOTONIC
//                                         on Linux, comparable with Python's time.monotonic_ns()).
//   acl-create TYPE NAME PATTERN PRINCIPAL OPERATION PERMISSION
//                                         Admin.createAcls of one binding (Kafka's enum names, host *):
//                                         "acl-created", or "refused" with the exception type
//   acl-list                              Admin.describeAcls(ANY): one "acl" line per binding
//   try-produce TOPIC                     one record (producer defaults): "ack" or "refused"
//   try-group-poll TOPIC GROUP            subscribe and poll for up to 10 s: "polled" with the
//                                         record count, or "refused" with the exception type
//
// Output: one JSON object per line on stdout; the last line is {"event":"done",...}
// on success or {"event":"error",...} (exit code 1) on failure. Diagnostics go to stderr.

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.Collection;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class SlipstreamDriver {
    private static final long API_TIMEOUT_MS = 20_000;

    private SlipstreamDriver() {}

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: SlipstreamDriver BOOTSTRAP COMMAND ARGS...");
            System.exit(2);
        }
        String bootstrap = args[0];
        String command = args[1];
        String[] rest = new String[args.length - 2];
        System.arraycopy(args, 2, rest, 0, rest.length);
        try {
            switch (command) {
                case "admin-create":
                    adminCreate(bootstrap, rest[0], Integer.parseInt(rest[1]));
                    break;
                case "admin-describe":
                    adminDescribe(bootstrap, rest[0]);
                    break;
                case "admin-list":
                    adminList(bootstrap);
                    break;
                case "admin-offsets":
                    adminOffsets(bootstrap, rest[0], rest[1]);
                    break;
                case "admin-cluster":
                    adminCluster(bootstrap);
                    break;
                case "admin-set-config":
                    adminSetConfig(bootstrap, rest[0], rest[1], rest[2]);
                    break;
                case "admin-remove-members":
                    adminRemoveMembers(bootstrap, rest);
                    break;
                case "produce":
                    produce(bootstrap, rest);
                    break;
                case "produce-until-stopped":
                    produceUntilStopped(bootstrap, rest);
                    break;
                case "consume":
                    consume(bootstrap, rest);
                    break;
                case "group-consume":
                    groupConsume(bootstrap, rest);
                    break;
                case "txn-copy":
                    txnCopy(bootstrap, rest);
                    break;
                case "acl-create":
                    aclCreate(bootstrap, rest);
                    break;
                case "acl-list":
                    aclList(bootstrap);
                    break;
                case "try-produce":
                    tryProduce(bootstrap, rest[0]);
                    break;
                case "try-group-poll":
                    tryGroupPoll(bootstrap, rest[0], rest[1]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + command);
            }
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            emit("{\"event\":\"error\",\"type\":" + q(root.getClass().getName())
                    + ",\"message\":" + q(String.valueOf(root.getMessage())) + "}");
            t.printStackTrace(System.err);
            System.out.flush();
            System.exit(1);
        }
        System.out.flush();
        System.exit(0);
    }

    // ---- output ---------------------------------------------------------------------------

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder(s.length() + 2);
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    private static String bytes(byte[] b) {
        return b == null ? "null" : q(new String(b, StandardCharsets.UTF_8));
    }

    // ---- client settings -------------------------------------------------------------------

    /** Every client's base settings: the properties file named by SLIPSTREAM_DRIVER_CLIENT_PROPERTIES
     *  (security settings for a TLS/SASL listener), or none. */
    private static Properties clientProperties() {
        Properties p = new Properties();
        String path = System.getenv("SLIPSTREAM_DRIVER_CLIENT_PROPERTIES");
        if (path != null && !path.isEmpty()) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new IllegalArgumentException("cannot read " + path + ": " + e, e);
            }
        }
        return p;
    }

    // ---- admin ----------------------------------------------------------------------------

    private static Admin admin(String bootstrap) {
        Properties p = clientProperties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(API_TIMEOUT_MS));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "slipstream-java-admin");
        return Admin.create(p);
    }

    private static void adminCreate(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            NewTopic nt = new NewTopic(topic, partitions, (short) 1);
            admin.createTopics(Collections.singleton(nt)).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            emit("{\"event\":\"created\",\"topic\":" + q(topic) + ",\"partitions\":" + partitions + "}");
            describeInto(admin, topic);
        }
        emit("{\"event\":\"done\"}");
    }

    private static void adminDescribe(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            describeInto(admin, topic);
        }
        emit("{\"event\":\"done\"}");
    }

    private static void describeInto(Admin admin, String topic) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(Collections.singleton(topic))
                .allTopicNames().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        TopicDescription td = d.get(topic);
        StringBuilder parts = new StringBuilder("[");
        for (TopicPartitionInfo pi : td.partitions()) {
            if (parts.length() > 1) {
                parts.append(',');
            }
            parts.append(pi.partition());
        }
        parts.append(']');
        emit("{\"event\":\"described\",\"topic\":" + q(topic) + ",\"topic_id\":"
                + q(String.valueOf(td.topicId())) + ",\"partitions\":" + parts + "}");
    }

    private static void adminList(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            Set<String> names = new TreeSet<>(admin.listTopics().names().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS));
            for (String n : names) {
                emit("{\"event\":\"topic\",\"topic\":" + q(n) + "}");
            }
        }
        emit("{\"event\":\"done\"}");
    }

    private static void adminOffsets(String bootstrap, String topic, String spec) throws Exception {
        OffsetSpec os;
        switch (spec) {
            case "earliest": os = OffsetSpec.earliest(); break;
            case "latest": os = OffsetSpec.latest(); break;
            case "max-timestamp": os = OffsetSpec.maxTimestamp(); break;
            default: os = OffsetSpec.forTimestamp(Long.parseLong(spec));
        }
        try (Admin admin = admin(bootstrap)) {
            TopicDescription td = admin.describeTopics(Collections.singleton(topic))
                    .allTopicNames().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
            Map<TopicPartition, OffsetSpec> query = new HashMap<>();
            for (TopicPartitionInfo pi : td.partitions()) {
                query.put(new TopicPartition(topic, pi.partition()), os);
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
                    admin.listOffsets(query).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : res.entrySet()) {
                emit("{\"event\":\"offset\",\"partition\":" + e.getKey().partition() + ",\"offset\":"
                        + e.getValue().offset() + ",\"timestamp\":" + e.getValue().timestamp() + "}");
            }
        }
        emit("{\"event\":\"done\"}");
    }

    private static void adminCluster(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            DescribeClusterResult r = admin.describeCluster();
            String clusterId = r.clusterId().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Node controller = r.controller().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            StringBuilder nodes = new StringBuilder("[");
            for (Node n : r.nodes().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                if (nodes.length() > 1) {
                    nodes.append(',');
                }
                nodes.append("{\"id\":").append(n.id()).append(",\"host\":").append(q(n.host()))
                        .append(",\"port\":").append(n.port()).append('}');
            }
            nodes.append(']');
            emit("{\"event\":\"cluster\",\"cluster_id\":" + q(clusterId) + ",\"controller\":"
                    + (controller == null ? "null" : String.valueOf(controller.id())) + ",\"nodes\":" + nodes + "}");
        }
        emit("{\"event\":\"done\"}");
    }

    private static void adminSetConfig(String bootstrap, String topic, String key, String value) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = admin(bootstrap)) {
            Map<ConfigResource, java.util.Collection<AlterConfigOp>> ops = new HashMap<>();
            ops.put(res, Collections.singletonList(
                    new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET)));
            admin.incrementalAlterConfigs(ops).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Config cfg = admin.describeConfigs(Collections.singleton(res)).all()
                    .get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(res);
            for (ConfigEntry e : cfg.entries()) {
                emit("{\"event\":\"config\",\"name\":" + q(e.name()) + ",\"value\":" + q(e.value())
                        + ",\"source\":" + q(String.valueOf(e.source())) + "}");
            }
        }
        emit("{\"event\":\"done\"}");
    }

    private static void adminRemoveMembers(String bootstrap, String[] a) throws Exception {
        String group = a[0];
        List<org.apache.kafka.clients.admin.MemberToRemove> members = new ArrayList<>();
        for (int i = 1; i < a.length; i++) {
            members.add(new org.apache.kafka.clients.admin.MemberToRemove(a[i]));
        }
        try (Admin admin = admin(bootstrap)) {
            admin.removeMembersFromConsumerGroup(group,
                    new org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions(members))
                    .all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        }
        for (int i = 1; i < a.length; i++) {
            emit("{\"event\":\"removed\",\"group_instance_id\":" + q(a[i]) + "}");
        }
        emit("{\"event\":\"done\"}");
    }

    // ---- produce --------------------------------------------------------------------------

    private static void produce(String bootstrap, String[] a) throws Exception {
        String topic = a[0];
        int count = Integer.parseInt(a[1]);
        String compression = a[2];
        Long baseTimestamp = null;
        for (int i = 3; i < a.length; i++) {
            if (a[i].equals("--base-timestamp")) {
                baseTimestamp = Long.parseLong(a[++i]);
            } else {
                throw new IllegalArgumentException("unknown produce option " + a[i]);
            }
        }
        Properties p = clientProperties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "slipstream-java-producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                final String key = "k" + i;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, null,
                        baseTimestamp == null ? null : baseTimestamp + i,
                        key.getBytes(StandardCharsets.UTF_8), ("v" + i).getBytes(StandardCharsets.UTF_8));
                rec.headers().add("i", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                producer.send(rec, (md, err) -> {
                    if (err != null) {
                        failed.incrementAndGet();
                        emit("{\"event\":\"nack\",\"key\":" + q(key) + ",\"type\":"
                                + q(err.getClass().getName()) + ",\"message\":" + q(String.valueOf(err.getMessage())) + "}");
                    } else {
                        acked.incrementAndGet();
                        emit("{\"event\":\"ack\",\"key\":" + q(key) + ",\"partition\":" + md.partition()
                                + ",\"offset\":" + md.offset() + ",\"timestamp\":" + md.timestamp() + "}");
                    }
                });
            }
            producer.flush();
        }
        if (failed.get() > 0) {
            throw new IllegalStateException(failed.get() + " of " + count + " records failed");
        }
        emit("{\"event\":\"done\",\"acked\":" + acked.get() + "}");
    }

    /**
     * A steady idempotent producer for failover tests: it runs until SIGTERM, so the test
     * decides when the last record is sent, and reports every record's outcome.
     */
    private static void produceUntilStopped(String bootstrap, String[] a) throws Exception {
        String topic = a[0];
        long intervalMs = 10;
        for (int i = 1; i < a.length; i++) {
            if (a[i].equals("--interval-ms")) {
                intervalMs = Long.parseLong(a[++i]);
            } else {
                throw new IllegalArgumentException("unknown produce-until-stopped option " + a[i]);
            }
        }
        Properties p = clientProperties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        // Long enough to outlast a failover: a record fails only if no leader takes it.
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "slipstream-java-steady-producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        final AtomicBoolean running = new AtomicBoolean(true);
        final CountDownLatch finished = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running.set(false);
            try {
                finished.await(150, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        AtomicInteger acked = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            emit("{\"event\":\"started\",\"t\":" + System.nanoTime() + "}");
            for (int i = 0; running.get(); i++) {
                final String key = String.valueOf(i);
                byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, bytes, bytes), (md, err) -> {
                    if (err != null) {
                        emit("{\"event\":\"nack\",\"key\":" + q(key) + ",\"type\":"
                                + q(err.getClass().getName()) + ",\"message\":" + q(String.valueOf(err.getMessage())) + "}");
                    } else {
                        acked.incrementAndGet();
                        emit("{\"event\":\"ack\",\"key\":" + q(key) + ",\"partition\":" + md.partition()
                                + ",\"offset\":" + md.offset() + "}");
                    }
                });
                Thread.sleep(intervalMs);
            }
            producer.flush();
            emit("{\"event\":\"done\",\"acked\":" + acked.get() + "}");
        } finally {
            finished.countDown();
        }
    }

    // ---- ACLs and authorization probes (a refusal is an event, not an error) ------------

    private static Throwable root(Throwable t) {
        Throwable r = t;
        while (r.getCause() != null && r.getCause() != r) {
            r = r.getCause();
        }
        return r;
    }

    private static void refused(Throwable t) {
        Throwable r = root(t);
        emit("{\"event\":\"refused\",\"type\":" + q(r.getClass().getName())
                + ",\"message\":" + q(String.valueOf(r.getMessage())) + "}");
    }

    /** acl-create TYPE NAME PATTERN PRINCIPAL OPERATION PERMISSION (Kafka's enum names). */
    private static void aclCreate(String bootstrap, String[] a) throws Exception {
        AclBinding binding = new AclBinding(
                new ResourcePattern(ResourceType.valueOf(a[0]), a[1], PatternType.valueOf(a[2])),
                new AccessControlEntry(a[3], "*", AclOperation.valueOf(a[4]), AclPermissionType.valueOf(a[5])));
        try (Admin admin = admin(bootstrap)) {
            admin.createAcls(Collections.singleton(binding)).all().get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            emit("{\"event\":\"acl-created\"}");
        } catch (java.util.concurrent.ExecutionException e) {
            refused(e);
        }
        emit("{\"event\":\"done\"}");
    }

    private static void aclList(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            for (AclBinding b : admin.describeAcls(AclBindingFilter.ANY).values()
                    .get(API_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                emit("{\"event\":\"acl\",\"type\":" + q(b.pattern().resourceType().name())
                        + ",\"name\":" + q(b.pattern().name()) + ",\"pattern\":" + q(b.pattern().patternType().name())
                        + ",\"principal\":" + q(b.entry().principal()) + ",\"operation\":"
                        + q(b.entry().operation().name()) + ",\"permission\":" + q(b.entry().permissionType().name()) + "}");
            }
        } catch (java.util.concurrent.ExecutionException e) {
            refused(e);
        }
        emit("{\"event\":\"done\"}");
    }

    /** One record to TOPIC: an ack, or the exception that refused it. */
    private static void tryProduce(String bootstrap, String topic) throws Exception {
        Properties p = clientProperties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>(topic, "k".getBytes(StandardCharsets.UTF_8),
                    "v".getBytes(StandardCharsets.UTF_8))).get(20, TimeUnit.SECONDS);
            emit("{\"event\":\"ack\"}");
        } catch (Exception e) {
            refused(e);
        }
        emit("{\"event\":\"done\"}");
    }

    /** Subscribe to TOPIC in GROUP and poll until a record arrives or a poll throws (10 s). */
    private static void tryGroupPoll(String bootstrap, String topic, String group) throws Exception {
        Properties p = clientProperties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 10000;
            int got = 0;
            while (got == 0 && System.currentTimeMillis() < deadline) {
                got = consumer.poll(Duration.ofMillis(200)).count();
            }
            emit("{\"event\":\"polled\",\"records\":" + got + "}");
        } catch (Exception e) {
            refused(e);
        }
        emit("{\"event\":\"done\"}");
    }

    // ---- txn-copy -------------------------------------------------------------------------

    private static void txnCopy(String bootstrap, String[] a) throws Exception {
        String in = a[0];
        String out = a[1];
        String group = a[2];
        String txnId = a[3];
        int count = Integer.parseInt(a[4]);
        boolean abortFirst = a.length > 5 && a[5].equals("--abort-first");
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int copied = 0;
        boolean aborted = !abortFirst;
        long deadline = System.currentTimeMillis() + 60_000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            while (copied < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                int n = 0;
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] value = ("copy-" + new String(r.value(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(out, r.key(), value));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    n++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (!aborted) {
                    producer.abortTransaction();
                    aborted = true;
                    // Rewind to what the group has committed: the aborted copies are redone.
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata om = committed.get(tp);
                        if (om == null) {
                            consumer.seekToBeginning(Collections.singletonList(tp));
                        } else {
                            consumer.seek(tp, om.offset());
                        }
                    }
                    emit("{\"event\":\"aborted\",\"records\":" + n + "}");
                    continue;
                }
                producer.commitTransaction();
                copied += n;
                emit("{\"event\":\"committed\",\"records\":" + n + "}");
            }
        }
        if (copied < count) {
            throw new IllegalStateException("copied " + copied + " of " + count);
        }
        emit("{\"event\":\"done\",\"copied\":" + copied + "}");
    }

    // ---- consume --------------------------------------------------------------------------

    private static void consume(String bootstrap, String[] a) throws Exception {
        String topic = a[0];
        int count = Integer.parseInt(a[1]);
        String mode = "--from-beginning";
        long timestamp = -1;
        long timeoutMs = 20_000;
        String isolation = "read_uncommitted";
        for (int i = 2; i < a.length; i++) {
            switch (a[i]) {
                case "--from-beginning":
                case "--latest":
                    mode = a[i];
                    break;
                case "--isolation":
                    isolation = a[++i];
                    break;
                case "--timestamp":
                    mode = a[i];
                    timestamp = Long.parseLong(a[++i]);
                    break;
                case "--timeout-ms":
                    timeoutMs = Long.parseLong(a[++i]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown consume option " + a[i]);
            }
        }
        Properties p = clientProperties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(API_TIMEOUT_MS));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "slipstream-java-consumer");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(API_TIMEOUT_MS));
            if (infos == null || infos.isEmpty()) {
                throw new IllegalStateException("no partitions for " + topic);
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : infos) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            switch (mode) {
                case "--from-beginning":
                    consumer.seekToBeginning(tps);
                    break;
                case "--latest":
                    consumer.seekToEnd(tps);
                    break;
                default: {
                    Map<TopicPartition, Long> query = new HashMap<>();
                    for (TopicPartition tp : tps) {
                        query.put(tp, timestamp);
                    }
                    Map<TopicPartition, OffsetAndTimestamp> found =
                            consumer.offsetsForTimes(query, Duration.ofMillis(API_TIMEOUT_MS));
                    List<TopicPartition> toEnd = new ArrayList<>();
                    for (TopicPartition tp : tps) {
                        OffsetAndTimestamp ot = found.get(tp);
                        if (ot == null) {
                            toEnd.add(tp);
                        } else {
                            consumer.seek(tp, ot.offset());
                        }
                    }
                    if (!toEnd.isEmpty()) {
                        consumer.seekToEnd(toEnd);
                    }
                }
            }
            // Resolve the positions now, so "ready" means new records will be seen.
            StringBuilder pos = new StringBuilder("{");
            for (TopicPartition tp : tps) {
                long position = consumer.position(tp, Duration.ofMillis(API_TIMEOUT_MS));
                if (pos.length() > 1) {
                    pos.append(',');
                }
                pos.append('"').append(tp.partition()).append("\":").append(position);
            }
            pos.append('}');
            emit("{\"event\":\"ready\",\"positions\":" + pos + "}");

            long deadline = System.currentTimeMillis() + timeoutMs;
            while (seen < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    StringBuilder h = new StringBuilder("[");
                    for (Header header : r.headers()) {
                        if (h.length() > 1) {
                            h.append(',');
                        }
                        h.append('[').append(q(header.key())).append(',').append(bytes(header.value())).append(']');
                    }
                    h.append(']');
                    emit("{\"event\":\"record\",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                            + ",\"key\":" + bytes(r.key()) + ",\"value\":" + bytes(r.value())
                            + ",\"timestamp\":" + r.timestamp() + ",\"timestamp_type\":" + q(r.timestampType().name)
                            + ",\"headers\":" + h + "}");
                    seen++;
                }
            }
        }
        emit("{\"event\":\"done\",\"count\":" + seen + "}");
    }
    // ---- group-consume ----------------------------------------------------------------------

    private static String partitionList(Collection<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        StringBuilder b = new StringBuilder("[");
        for (Integer p : sorted) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(p);
        }
        return b.append(']').toString();
    }

    private static String offsetMap(Map<TopicPartition, OffsetAndMetadata> offsets) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('"').append(e.getKey().partition()).append("\":").append(e.getValue().offset());
        }
        return b.append('}').toString();
    }

    /**
     * Range, but the leader sleeps in an assignment when the stall file is there (deleted first):
     * its SyncGroup comes late, as a slow custom assignor's would.
     */
    public static final class StallingRangeAssignor extends RangeAssignor {
        static volatile String stallFile;
        static volatile long stallMs;

        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
            try {
                if (stallFile != null && Files.deleteIfExists(Paths.get(stallFile))) {
                    emit("{\"event\":\"assignment_stalling\",\"t\":" + System.nanoTime() + "}");
                    Thread.sleep(stallMs);
                }
            } catch (IOException | InterruptedException e) {
                throw new RuntimeException(e);
            }
            return super.assign(metadata, groupSubscription);
        }
    }

    /** A group member's state; touched only by the polling thread (callbacks run inside poll). */
    private static final class GroupMember implements ConsumerRebalanceListener {
        final String topic;
        final KafkaConsumer<byte[], byte[]> consumer;
        final Map<Integer, Long> processedNext = new HashMap<>();
        final Map<Integer, Long> committed = new HashMap<>();
        final Set<TopicPartition> owned = new java.util.HashSet<>();
        /**
         * Seek newly assigned partitions to the group's committed offsets in onPartitionsAssigned.
         * Set for group.protocol=consumer: the 3.9 AsyncKafkaConsumer (KAFKA-17674, fixed in the
         * 4.0 client) resets to auto.offset.reset, without an OffsetFetch, a partition that is
         * assigned while an OffsetFetch for other newly assigned partitions is in flight.
         */
        final boolean seekCommittedOnAssign;
        boolean closing;
        int lastGeneration = -2;

        GroupMember(String topic, KafkaConsumer<byte[], byte[]> consumer, boolean seekCommittedOnAssign) {
            this.topic = topic;
            this.consumer = consumer;
            this.seekCommittedOnAssign = seekCommittedOnAssign;
        }

        int generation() {
            try {
                return consumer.groupMetadata().generationId();
            } catch (RuntimeException e) {
                return -1;
            }
        }

        /** commitSync what was processed of these partitions and not yet committed. */
        void commitProcessed(Collection<TopicPartition> parts) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : parts) {
                Long next = processedNext.get(tp.partition());
                if (next != null && next > committed.getOrDefault(tp.partition(), -1L)) {
                    offsets.put(tp, new OffsetAndMetadata(next));
                }
            }
            commit(offsets);
        }

        void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            if (offsets.isEmpty()) {
                return;
            }
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(10));
            } catch (WakeupException e) {
                // SIGTERM: the close path commits again.
                emit("{\"event\":\"commit_failed\",\"t\":" + System.nanoTime() + ",\"error\":\"wakeup\",\"offsets\":"
                        + offsetMap(offsets) + "}");
                return;
            } catch (KafkaException e) {
                emit("{\"event\":\"commit_failed\",\"t\":" + System.nanoTime() + ",\"error\":"
                        + q(e.getClass().getSimpleName() + ": " + e.getMessage()) + ",\"offsets\":" + offsetMap(offsets)
                        + ",\"generation\":" + generation() + "}");
                return;
            }
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                committed.put(e.getKey().partition(), e.getValue().offset());
            }
            emit("{\"event\":\"committed\",\"t\":" + System.nanoTime() + ",\"offsets\":" + offsetMap(offsets)
                    + ",\"generation\":" + generation() + "}");
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            if (closing) {
                return;
            }
            commitProcessed(parts);
            owned.removeAll(parts);
            emit("{\"event\":\"revoked\",\"t\":" + System.nanoTime() + ",\"partitions\":" + partitionList(parts)
                    + ",\"owned\":" + partitionList(owned) + "}");
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            long t = System.nanoTime();
            if (closing) {
                return;
            }
            // What was processed under an earlier ownership is not this ownership's to commit:
            // another member may have committed past it since.
            for (TopicPartition tp : parts) {
                processedNext.remove(tp.partition());
                committed.remove(tp.partition());
            }
            owned.addAll(parts);
            emit("{\"event\":\"assigned\",\"t\":" + t + ",\"partitions\":" + partitionList(parts)
                    + ",\"owned\":" + partitionList(consumer.assignment()) + ",\"generation\":" + generation()
                    + ",\"member_id\":" + q(consumer.groupMetadata().memberId()) + "}");
            if (seekCommittedOnAssign && !parts.isEmpty()) {
                // The partitions are not fetched before this callback returns, so the seek
                // wins over a reset the client may already have started for them. A partition
                // without a committed offset keeps the client's own (auto.offset.reset) position.
                Map<TopicPartition, OffsetAndMetadata> committedNow = consumer.committed(new java.util.HashSet<>(parts));
                for (TopicPartition tp : parts) {
                    OffsetAndMetadata om = committedNow.get(tp);
                    if (om != null) {
                        consumer.seek(tp, om.offset());
                    }
                }
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            long t = System.nanoTime();
            owned.removeAll(parts);
            for (TopicPartition tp : parts) {
                processedNext.remove(tp.partition());
            }
            if (closing) {
                return;
            }
            emit("{\"event\":\"lost\",\"t\":" + t + ",\"partitions\":" + partitionList(parts)
                    + ",\"owned\":" + partitionList(owned) + "}");
        }

        void noteGeneration() {
            int gen = generation();
            if (gen != lastGeneration) {
                lastGeneration = gen;
                emit("{\"event\":\"generation\",\"t\":" + System.nanoTime() + ",\"generation\":" + gen
                        + ",\"member_id\":" + q(consumer.groupMetadata().memberId()) + "}");
            }
        }
    }

    static final String ENFORCED_REBALANCE_REASON = "the test enforced a rebalance";

    private static void groupConsume(String bootstrap, String[] a) throws Exception {
        String topic = a[0];
        String group = a[1];
        String assignor = "range";
        String clientId = "slipstream-java-member";
        String instanceId = null;
        String sessionMs = "10000";
        String heartbeatMs = "1000";
        String maxPollMs = "30000";
        String maxPollRecords = "50";
        String groupProtocol = "classic";
        String rebalanceTrigger = null;
        for (int i = 2; i < a.length; i++) {
            switch (a[i]) {
                case "--rebalance-trigger": rebalanceTrigger = a[++i]; break;
                case "--stall-assignment-file": StallingRangeAssignor.stallFile = a[++i]; break;
                case "--stall-assignment-ms": StallingRangeAssignor.stallMs = Long.parseLong(a[++i]); break;
                case "--group-protocol": groupProtocol = a[++i]; break;
                case "--assignor": assignor = a[++i]; break;
                case "--client-id": clientId = a[++i]; break;
                case "--instance-id": instanceId = a[++i]; break;
                case "--session-timeout-ms": sessionMs = a[++i]; break;
                case "--heartbeat-ms": heartbeatMs = a[++i]; break;
                case "--max-poll-interval-ms": maxPollMs = a[++i]; break;
                case "--max-poll-records": maxPollRecords = a[++i]; break;
                default: throw new IllegalArgumentException("unknown group-consume option " + a[i]);
            }
        }
        Properties p = clientProperties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        if (instanceId != null) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        if (groupProtocol.equals("consumer")) {
            // KIP-848: the broker owns the session, the heartbeat interval and the assignor.
            p.put("group.protocol", "consumer");
            p.put("group.remote.assignor", assignor);
        } else {
            // A comma-separated list offers several protocols, in order of preference.
            List<String> assignorClasses = new ArrayList<>();
            for (String name : assignor.split(",")) {
                switch (name.trim()) {
                    case "range": assignorClasses.add(
                            (StallingRangeAssignor.stallFile != null ? StallingRangeAssignor.class : RangeAssignor.class)
                                    .getName());
                        break;
                    case "roundrobin": assignorClasses.add(RoundRobinAssignor.class.getName()); break;
                    case "sticky": assignorClasses.add(StickyAssignor.class.getName()); break;
                    case "cooperative-sticky": assignorClasses.add(CooperativeStickyAssignor.class.getName()); break;
                    default: throw new IllegalArgumentException("unknown assignor " + name);
                }
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", assignorClasses));
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, heartbeatMs);
        }
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, maxPollMs);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPollRecords);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(API_TIMEOUT_MS));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

        final KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        final AtomicBoolean running = new AtomicBoolean(true);
        final CountDownLatch finished = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running.set(false);
            consumer.wakeup();
            try {
                finished.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        GroupMember m = new GroupMember(topic, consumer, groupProtocol.equals("consumer"));
        try {
            consumer.subscribe(Collections.singletonList(topic), m);
            emit("{\"event\":\"started\",\"t\":" + System.nanoTime() + "}");
            while (running.get()) {
                if (rebalanceTrigger != null && Files.deleteIfExists(Paths.get(rebalanceTrigger))) {
                    consumer.enforceRebalance(ENFORCED_REBALANCE_REASON);
                    emit("{\"event\":\"rebalance_enforced\",\"t\":" + System.nanoTime() + "}");
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("{\"event\":\"record\",\"t\":" + System.nanoTime() + ",\"partition\":" + r.partition()
                            + ",\"offset\":" + r.offset() + ",\"key\":" + bytes(r.key()) + "}");
                    m.processedNext.put(r.partition(), r.offset() + 1);
                    batch.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                // Commit the batch and retry what an earlier failed commit (a rebalance in
                // progress, a coordinator moving) left behind, as an at-least-once application
                // would: else the last records before the producer stops stay uncommitted.
                Set<TopicPartition> due = new java.util.HashSet<>(m.owned);
                due.addAll(batch.keySet());
                m.commitProcessed(due);
                m.noteGeneration();
            }
            // Graceful shutdown: commit what was processed, give the partitions up, close.
            m.commitProcessed(new ArrayList<>(m.owned));
            emit("{\"event\":\"revoked\",\"t\":" + System.nanoTime() + ",\"reason\":\"close\",\"partitions\":"
                    + partitionList(m.owned) + ",\"owned\":[]}");
            m.closing = true;
            m.owned.clear();
            consumer.close(Duration.ofSeconds(10));
            emit("{\"event\":\"closed\",\"t\":" + System.nanoTime() + "}");
            emit("{\"event\":\"done\"}");
        } finally {
            finished.countDown();
        }
    }
}
