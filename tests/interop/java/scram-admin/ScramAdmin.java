import java.io.FileInputStream;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

/**
 * The Java Admin's alterUserScramCredentials (bootstrap.servers) against a kraftnode.
 * Usage: ScramAdmin BOOTSTRAP_SERVERS CLIENT_CONFIG upsert USER MECHANISM PASSWORD ITERATIONS
 *        ScramAdmin BOOTSTRAP_SERVERS CLIENT_CONFIG delete USER MECHANISM
 * Prints "OK" or "ERROR <exception class>: <message>".
 */
public class ScramAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) {
            props.load(in);
        }
        // bootstrap.servers: the 3.9 Admin refuses this API with bootstrap.controllers (client side)
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        ScramMechanism mech = ScramMechanism.fromMechanismName(args[4]);
        UserScramCredentialAlteration alteration = args[2].equals("upsert")
            ? new UserScramCredentialUpsertion(args[3], new ScramCredentialInfo(mech, Integer.parseInt(args[6])), args[5])
            : new UserScramCredentialDeletion(args[3], mech);
        try (Admin admin = Admin.create(props)) {
            admin.alterUserScramCredentials(List.of(alteration)).all().get();
            System.out.println("OK");
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause();
            System.out.println("ERROR " + c.getClass().getSimpleName() + ": " + c.getMessage());
        }
    }
}
