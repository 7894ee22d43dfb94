import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.AccessControlEntryRecord;
import org.apache.kafka.common.metadata.RemoveAccessControlEntryRecord;
import org.apache.kafka.image.AclsDelta;
import org.apache.kafka.image.AclsImage;
import org.apache.kafka.image.writer.ImageWriterOptions;
import org.apache.kafka.image.writer.RecordListWriter;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Kafka 3.9's AclsImage as a controller builds it and writes it into a snapshot.
 * stdin: one change a line, in replay order: "+ID" (an AccessControlEntryRecord; ID a Uuid
 * string) or "-ID" (RemoveAccessControlEntryRecord); an empty line ends a delta (a batch).
 * stdout: the ids of the AccessControlEntryRecords AclsImage.write emits, one a line.
 */
public class AclsImageOrder {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        AclsImage image = AclsImage.EMPTY;
        AclsDelta delta = new AclsDelta(image);
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                image = delta.apply();
                delta = new AclsDelta(image);
                continue;
            }
            Uuid id = Uuid.fromString(line.substring(1));
            if (line.charAt(0) == '+') {
                delta.replay(new AccessControlEntryRecord().setId(id).setResourceType((byte) 2)
                        .setResourceName("t-" + id).setPatternType((byte) 3).setPrincipal("User:a")
                        .setHost("*").setOperation((byte) 3).setPermissionType((byte) 3));
            } else {
                delta.replay(new RemoveAccessControlEntryRecord().setId(id));
            }
        }
        image = delta.apply();
        RecordListWriter writer = new RecordListWriter();
        image.write(writer, new ImageWriterOptions.Builder().build());
        writer.close(true);
        for (ApiMessageAndVersion r : writer.records()) {
            System.out.println(((AccessControlEntryRecord) r.message()).id());
        }
    }
}
