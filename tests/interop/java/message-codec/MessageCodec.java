import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

/**
 * Reads messages with Kafka's own generated classes and writes them again.
 * Input, one request a line: {@code NAME VERSION HEX}, NAME a schema name (VoteRequest,
 * PartitionRecord, QuorumStateData, ...). Output, one JSON object a line:
 * {"bytes": HEX, "json": {...}} -- the bytes Kafka's class writes for what it read, and what
 * its JsonConverter makes of it -- or {"error": "..."} (no such class, a version the class
 * does not have: "unsupported: ...", bytes it cannot read, bytes left after the message).
 */
public class MessageCodec {
    private static final String[] PACKAGES = {
        "org.apache.kafka.common.message.", "org.apache.kafka.common.metadata.",
        "org.apache.kafka.raft.generated.", "org.apache.kafka.coordinator.group.generated.",
    };
    private static final ObjectMapper JSON = new ObjectMapper();

    private static Class<?> find(String name) {
        for (String pkg : PACKAGES) {
            for (String suffix : new String[] {"Data", ""}) {
                try {
                    Class<?> c = Class.forName(pkg + name + suffix);
                    if (Message.class.isAssignableFrom(c)) return c;
                } catch (ClassNotFoundException e) {
                    // next
                }
            }
        }
        return null;
    }

    private static String answer(String line) throws Exception {
        String[] parts = line.split(" ", 3);
        ObjectNode out = JSON.createObjectNode();
        Class<?> cls = find(parts[0]);
        if (cls == null) {
            return out.put("error", "no class for " + parts[0]).toString();
        }
        short version = Short.parseShort(parts[1]);
        Message probe = (Message) cls.getConstructor().newInstance();
        if (version < probe.lowestSupportedVersion() || version > probe.highestSupportedVersion()) {
            return out.put("error", "unsupported: " + cls.getSimpleName() + " has versions "
                + probe.lowestSupportedVersion() + "-" + probe.highestSupportedVersion()).toString();
        }
        byte[] raw = parts.length > 2 ? HexFormat.of().parseHex(parts[2]) : new byte[0];
        ByteBuffer in = ByteBuffer.wrap(raw);
        Message m;
        try {
            Constructor<?> ctor = cls.getConstructor(Readable.class, short.class);
            m = (Message) ctor.newInstance(new ByteBufferAccessor(in), version);
        } catch (InvocationTargetException e) {
            return out.put("error", "read: " + e.getCause()).toString();
        }
        if (in.hasRemaining()) {
            return out.put("error", "read: " + in.remaining() + " bytes left after the message").toString();
        }
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buf = ByteBuffer.allocate(m.size(cache, version));
        m.write(new ByteBufferAccessor(buf), cache, version);
        out.put("bytes", HexFormat.of().formatHex(buf.array()));
        try {
            Class<?> conv = Class.forName(cls.getName() + "JsonConverter");
            Method write = conv.getMethod("write", cls, short.class);
            out.set("json", (com.fasterxml.jackson.databind.JsonNode) write.invoke(null, m, version));
        } catch (ClassNotFoundException e) {
            out.putNull("json");
        } catch (InvocationTargetException e) {
            out.put("json_error", String.valueOf(e.getCause()));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream o = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = r.readLine()) != null) {
            if (line.isEmpty()) continue;
            String reply;
            try {
                reply = answer(line);
            } catch (Throwable t) {
                reply = JSON.createObjectNode().put("error", "failed: " + t).toString();
            }
            o.println(reply);
        }
        o.flush();
    }
}
