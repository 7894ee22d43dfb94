import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * Hadoop's own single-process HDFS (a real NameNode and DataNode) on 127.0.0.1, for the tests.
 *
 * <pre>java -cp 'LIBS/*:CLASSES' MiniHdfs DATA_DIR READY_FILE</pre>
 *
 * Writes the NameNode's URI (hdfs://127.0.0.1:PORT) into READY_FILE once the cluster is up
 * (written under a temporary name, then renamed), and runs until stdin closes or the
 * process is stopped; then it shuts the cluster down.
 */
public final class MiniHdfs {
    public static void main(String[] args) throws Exception {
        File base = new File(args[0]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.permissions.enabled", "false");
        conf.setInt("dfs.replication", 1);
        final MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .numDataNodes(1).nameNodePort(0).format(true).build();
        cluster.waitActive();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
        String uri = "hdfs://127.0.0.1:" + cluster.getNameNodePort();
        File tmp = new File(args[1] + ".tmp");
        Files.write(tmp.toPath(), (uri + "\n").getBytes(StandardCharsets.UTF_8));
        Files.move(tmp.toPath(), Paths.get(args[1]), StandardCopyOption.ATOMIC_MOVE);
        System.out.println("MiniHdfs ready " + uri);
        System.out.flush();
        while (System.in.read() != -1) {
            // run until stdin closes (the test's end) or a signal stops the JVM
        }
        System.exit(0);
    }
}
