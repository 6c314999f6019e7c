// Runs the Java client's own partition assignors on cases read from stdin, one per
// line, and prints one answer line per case. Used by test_java_oracle.py as an
// independent oracle for Slipstream's assignors. Names in cases are limited to
// [A-Za-z0-9._-], so the separators below never need escaping.
//
//   ASSIGN <assignor> \t <topic:count,...> \t <member> \t <member> ...
//     member = id|instance|topic,topic|topic/partition,...|generation|userdata-hex
//     (empty instance = dynamic member; userdata "" = null, "~" = empty bytes)
//     -> member=topic/partition,...;member=...
//   USERDATA <assignor> \t <generation> \t <topic/partition,...>
//     -> hex of subscriptionUserData() after onAssignment(partitions, generation)
//   MEMBERDATA <assignor> \t <member>
//     -> topic/partition,...|generation   (how the Java leader reads that member)

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractPartitionAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.TopicPartition;

public class AssignorOracle {

    static ConsumerPartitionAssignor byName(String name) {
        switch (name) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    static List<TopicPartition> parsePartitions(String s) {
        List<TopicPartition> out = new ArrayList<>();
        if (s.isEmpty()) return out;
        for (String item : s.split(",")) {
            int slash = item.lastIndexOf('/');
            out.add(new TopicPartition(item.substring(0, slash), Integer.parseInt(item.substring(slash + 1))));
        }
        return out;
    }

    static String formatPartitions(List<TopicPartition> tps) {
        StringBuilder sb = new StringBuilder();
        for (TopicPartition tp : tps) {
            if (sb.length() > 0) sb.append(',');
            sb.append(tp.topic()).append('/').append(tp.partition());
        }
        return sb.toString();
    }

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++)
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(ByteBuffer b) {
        if (b == null) return "null";
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }

    static final class Member {
        String id;
        Subscription subscription;
    }

    static Member parseMember(String s) {
        String[] f = s.split("\\|", -1);
        Member m = new Member();
        m.id = f[0];
        List<String> topics = new ArrayList<>();
        if (!f[2].isEmpty()) for (String t : f[2].split(",")) topics.add(t);
        ByteBuffer userData = null;
        if (f[5].equals("~")) userData = ByteBuffer.allocate(0);
        else if (!f[5].isEmpty()) userData = ByteBuffer.wrap(unhex(f[5]));
        m.subscription = new Subscription(topics, userData, parsePartitions(f[3]), Integer.parseInt(f[4]), Optional.empty());
        if (!f[1].isEmpty()) m.subscription.setGroupInstanceId(Optional.of(f[1]));
        return m;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            try {
                out.println(handle(line));
            } catch (Exception e) {
                out.println("ERROR " + e);
            }
            out.flush();
        }
    }

    static String handle(String line) throws Exception {
        int sp = line.indexOf(' ');
        String cmd = line.substring(0, sp);
        String[] f = line.substring(sp + 1).split("\t", -1);
        switch (cmd) {
            case "ASSIGN": {
                AbstractPartitionAssignor assignor = (AbstractPartitionAssignor) byName(f[0]);
                Map<String, Integer> partitionsPerTopic = new HashMap<>();
                if (!f[1].isEmpty()) {
                    for (String tc : f[1].split(",")) {
                        int colon = tc.lastIndexOf(':');
                        partitionsPerTopic.put(tc.substring(0, colon), Integer.parseInt(tc.substring(colon + 1)));
                    }
                }
                Map<String, Subscription> subscriptions = new HashMap<>();
                for (int i = 2; i < f.length; i++) {
                    Member m = parseMember(f[i]);
                    subscriptions.put(m.id, m.subscription);
                }
                Map<String, List<TopicPartition>> result = assignor.assign(partitionsPerTopic, subscriptions);
                StringBuilder sb = new StringBuilder();
                for (Map.Entry<String, List<TopicPartition>> e : new TreeMap<>(result).entrySet()) {
                    if (sb.length() > 0) sb.append(';');
                    sb.append(e.getKey()).append('=').append(formatPartitions(e.getValue()));
                }
                return sb.toString();
            }
            case "USERDATA": {
                ConsumerPartitionAssignor assignor = byName(f[0]);
                int generation = Integer.parseInt(f[1]);
                if (generation >= 0 || !f[2].isEmpty()) {
                    assignor.onAssignment(new Assignment(parsePartitions(f[2])),
                            new ConsumerGroupMetadata("g", generation, "m", Optional.empty()));
                }
                return hex(assignor.subscriptionUserData(new java.util.HashSet<>()));
            }
            case "MEMBERDATA": {
                AbstractStickyAssignor assignor = (AbstractStickyAssignor) byName(f[0]);
                Member m = parseMember(f[1]);
                Method md = assignor.getClass().getDeclaredMethod("memberData", Subscription.class);
                md.setAccessible(true);
                AbstractStickyAssignor.MemberData data = (AbstractStickyAssignor.MemberData) md.invoke(assignor, m.subscription);
                return formatPartitions(data.partitions) + "|" + (data.generation.isPresent() ? data.generation.get().toString() : "none");
            }
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }
}
